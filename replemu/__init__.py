"""The replemu application: the command line, campaigns and shrinking, text reports, the
dashboard, and the bundled scenarios (``replemu/scenarios``, ``conf/scenarios`` in the source
tree).  The only package that knows all the others::

    replemu  ->  expectations  ->  streaming  ->  emulator
             ->  scenario_io   ------------------>  emulator
"""
