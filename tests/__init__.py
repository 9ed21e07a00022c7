"""The test suite: one folder per wing; shared helpers and child scripts at this level."""
