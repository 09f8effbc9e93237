"""The two catalogs JEDI reads from elsewhere: the data catalog (datasets, files, replicas) and the
resource catalog (sites, nuclei, storage endpoints), and importing both from documents.
"""
