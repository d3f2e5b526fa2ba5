"""What a command runs, end to end (a scoring run, certify, validate, an optimisation, a scaling
study), so that the command modules stay a parser and a ``main``.  Imports reporting and below."""
