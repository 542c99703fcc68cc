"""The ``harness`` command line: the parser and its table of commands (:mod:`.main`) and one
module per command (run, judge, calibrate, record, devices, demo, view, tasks, sim, ...). The
only package that knows every part of the system."""
