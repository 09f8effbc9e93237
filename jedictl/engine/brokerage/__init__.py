"""Where work goes: the Task Broker pass and nucleus choice (task brokerage), the job brokerage with its
filters and weights, what one job needs at a site, and loading what brokerage decides on.
"""
