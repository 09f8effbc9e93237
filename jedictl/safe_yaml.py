"""YAML as jedictl reads it everywhere (task specs, catalogs, rules, queues, the configuration): the safe
loader -- libyaml's where PyYAML was built with it -- that also refuses a mapping holding one key twice.

PyYAML keeps the last of two equal keys without a word, so a sites file with `nuclei:` twice silently
loses the first list. Keys merged in with `<<` may still be overridden: that is what a merge is for.
"""

from __future__ import annotations

from typing import Any

import yaml

#: libyaml's parser where PyYAML was built with it (a 20k-file catalog parses 2.7x faster), else PyYAML's own.
_BASE: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


def unique_key_loader(base: Any) -> Any:
    """`base` (a safe loader class) refusing duplicate mapping keys: a ConstructorError naming the key
    and both lines."""

    class Loader(base):  # type: ignore[misc,valid-type]
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            if isinstance(node, yaml.MappingNode):
                first_at: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                        continue  # merges may override; a complex key is refused by the constructor itself
                    key = self.construct_object(key_node, deep=True)
                    if key in first_at:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping", node.start_mark,
                            f"found duplicate key {key!r} (first at line {first_at[key]})", key_node.start_mark)
                    first_at[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    Loader.__name__ = Loader.__qualname__ = f"UniqueKey{base.__name__}"
    return Loader


UniqueKeyLoader = unique_key_loader(_BASE)


def load(text: str) -> Any:
    """One YAML document, safely, refusing duplicate keys (yaml.YAMLError when it is not valid)."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - UniqueKeyLoader is a SafeLoader
