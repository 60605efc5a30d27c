"""GPU self-tests that run through the device seam on any host: the dependent chain of the submit
probe (chain.py) and the "Check this device" suite."""
