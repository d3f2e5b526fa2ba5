"""One bounded cache type for the package: least recently used, computed on a miss."""

from collections import OrderedDict


class BoundedCache:
    """At most ``maxsize`` values by key, the least recently used dropped first.

    ``on_evict(value)`` is called for a value that is dropped (for example to
    close the PETSc objects it owns); ``hits`` and ``misses`` count lookups.
    """

    def __init__(self, maxsize=256, on_evict=None):
        if maxsize < 1:
            raise ValueError(f"a cache holds at least one value, not {maxsize}")
        self.maxsize = maxsize
        self.on_evict = on_evict
        self._items = OrderedDict()
        self.hits = self.misses = 0

    def get_or_compute(self, key, compute):
        """The value of ``key``, computing it with ``compute()`` on a miss."""
        if key in self._items:
            self.hits += 1
            self._items.move_to_end(key)
            return self._items[key]
        self.misses += 1
        value = compute()
        self._items[key] = value
        if len(self._items) > self.maxsize:
            _, dropped = self._items.popitem(last=False)
            if self.on_evict is not None:
                self.on_evict(dropped)
        return value

    def values(self):
        return list(self._items.values())

    def clear(self):
        """Drop every value (``on_evict`` is called for each) and reset the counts."""
        items = list(self._items.values())
        self._items.clear()
        self.hits = self.misses = 0
        if self.on_evict is not None:
            for value in items:
                self.on_evict(value)

    close = clear  # a cache its owner keeps beside other resources closes as they do

    def __len__(self):
        return len(self._items)

    def __contains__(self, key):  # neither a hit nor a miss, and the order of use unchanged
        return key in self._items
