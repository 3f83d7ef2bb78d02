"""The docs' figures: marked blocks of README.md and docs/*.md rewritten from the models (`cosim docs`).

``blocks`` finds and rewrites the blocks, ``figures`` says what each holds, ``refresh`` checks and
regenerates the pages.
"""
