"""Helpers the tests share: independent references, test images, stand-ins, prerequisites."""
