"""The SIMP yardstick: filter -> SIMP runs -> binarisation -> swap polish -> best design."""
