"""The jobhook command (entry point: receiver.cli.main:main)."""
