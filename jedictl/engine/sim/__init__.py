"""The pilot simulator and the demo: executors played by the program.
"""
