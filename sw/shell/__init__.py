"""The accelerator shells' specification (:mod:`sw.shell.spec`)."""
