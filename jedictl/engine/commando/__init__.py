"""Operator commands on tasks (JEDI's Task Commando): which command in which status, and applying it.
"""
