"""The benchmark side of pipebench: the command line, strategies, launcher and suite."""
