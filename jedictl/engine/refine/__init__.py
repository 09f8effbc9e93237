"""The Task Refiner pass: registered -> defined (datasets, templates, work queue, global share, resource type).
"""
