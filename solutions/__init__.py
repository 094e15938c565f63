"""The reference implementation of minilm's exercises (instructors only).

Same module names and API as `minilm`; the student stubs in `minilm/` are generated from
these files by `minilm stubs`. Never shipped in a student release.
"""
