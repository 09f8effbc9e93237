"""Read models: task and job views, explain, metrics. They read; they never change the store.
"""
