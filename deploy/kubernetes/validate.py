#!/usr/bin/python3
"""Validates Kubernetes manifests offline against the official Kubernetes Python client's models
(Debian 12: python3-kubernetes, installed by scripts/install-deps.sh), since no cluster runs here.

Each document is checked strictly: every field must exist in its kind's model (the models are
generated from the Kubernetes OpenAPI specification), scalars must have the model's type (a string
where an int is expected is an error; int-or-string fields take either), and the model's required
fields must be present (client-side validation of the generated constructors).

Usage: validate.py FILE... ; exit 0 when every document is valid, 1 otherwise (each error printed
as FILE: KIND/NAME: PATH: problem). A file named kustomization.yaml is not a resource: skipped.
"""

import json
import os
import re
import sys

import yaml
from kubernetes import client

PRIMITIVES = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "date": (str,),
    "datetime": (str,),
    "object": (object,),
}


def model_class(api_version, kind):
    """apps/v1 Deployment -> V1Deployment (the group does not appear in the model's name)."""
    version = api_version.rpartition("/")[2]
    return getattr(client, version[:1].upper() + version[1:] + kind, None)


def check(value, type_name, path, errors):
    """Checks `value` against the model type `type_name` (e.g. 'list[V1Container]')."""
    m = re.fullmatch(r"list\[(.+)\]", type_name)
    if m:
        if not isinstance(value, list):
            errors.append(f"{path}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            check(item, m.group(1), f"{path}[{i}]", errors)
        return
    m = re.fullmatch(r"dict\(([^,]+), (.+)\)", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append(f"{path}: expected a map, got {type(value).__name__}")
            return
        for k, v in value.items():
            check(v, m.group(2), f"{path}.{k}", errors)
        return
    if type_name in PRIMITIVES:
        ok = isinstance(value, PRIMITIVES[type_name])
        if type_name in ("int", "float") and isinstance(value, bool):
            ok = False
        if not ok:
            errors.append(f"{path}: expected {type_name}, got {type(value).__name__} {value!r}")
        return
    cls = getattr(client, type_name, None)
    if cls is None:
        errors.append(f"{path}: unknown model type {type_name}")
        return
    if not isinstance(value, dict):
        errors.append(f"{path}: expected a {type_name} map, got {type(value).__name__}")
        return
    by_json = {json: attr for attr, json in cls.attribute_map.items()}
    for key, v in value.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: unknown field of {type_name}")
            continue
        if v is None:
            continue
        check(v, cls.openapi_types[by_json[key]], f"{path}.{key}", errors)


class FakeResponse:
    def __init__(self, data):
        self.data = data


def validate(doc, where):
    errors = []
    if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
        return [f"{where}: not a Kubernetes object (apiVersion and kind are required)"]
    cls = model_class(doc["apiVersion"], doc["kind"])
    if cls is None:
        return [f"{where}: no model for {doc['apiVersion']} {doc['kind']}"]
    name = (doc.get("metadata") or {}).get("name", "?")
    label = f"{where}: {doc['kind']}/{name}"
    check(doc, cls.__name__, label, errors)
    # Required fields: the generated constructors refuse None for them.
    try:
        client.ApiClient().deserialize(FakeResponse(json.dumps(doc)), cls.__name__)
    except (ValueError, TypeError, AttributeError) as e:
        errors.append(f"{label}: {e}")
    return errors


def main(paths):
    errors = []
    count = 0
    for path in paths:
        if os.path.basename(path) == "kustomization.yaml":
            continue
        with open(path, encoding="utf-8") as f:
            for i, doc in enumerate(yaml.safe_load_all(f)):
                if doc is None:
                    continue
                count += 1
                errors += validate(doc, f"{path}#{i}")
    for e in errors:
        print(e)
    print(f"validate.py: {count} documents, {len(errors)} errors")
    return 1 if errors or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
