"""The Contents Feeder pass: input datasets -> file records, scouts' release, open and lost files.
"""
