"""Storage you can touch: where a replica lives under an endpoint's `file://` root (Rucio's deterministic
layout), its adler32, and the stage-in / stage-out moves that the pilot and `data import --scan` make.

Every failure is a `StorageError` carrying the PanDA pilot's error code, so a job that fails here is
reported with the code PanDA would use. Nothing here touches the store.
"""
