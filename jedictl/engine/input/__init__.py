"""Reading what users give: documents (YAML/JSON with limits), typed fields, safe regular expressions and
the work-queue criteria language. Pure; imports nothing else of the engine.
"""
