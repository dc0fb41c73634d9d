"""PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and an approximation of
strategic merge patch.

Strategic merge patch is approximated: maps merge like a merge patch; a list of maps is merged
element by element when the patch's elements carry a merge key the original's also carry (`name`,
`containerPort`, `port`, `mountPath`, `type`, `devicePath`, `ip`), honouring `$patch: delete` /
`$patch: replace` and `$setElementOrder/<field>`; other lists are replaced whole;
`$deleteFromPrimitiveList/<field>` removes values; `$retainKeys` is ignored. That covers what
`kubectl apply` / `kubectl edit` send for the objects the controller uses; it is not the
schema-driven patch of a real API server (which reads patchMergeKey from the Go types).
"""

import copy


class PatchError(ValueError):
    """A patch that cannot be applied (the server answers 422 or 400)."""


def merge_patch(target, patch):
    """RFC 7386: returns the patched copy of target."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


_MERGE_KEYS = ("name", "containerPort", "port", "mountPath", "devicePath", "type", "ip")


def _merge_key(orig_list, patch_list):
    items = [p for p in patch_list if isinstance(p, dict)]
    if not items or len(items) != len(patch_list):
        return None
    for key in _MERGE_KEYS:
        if all(key in p for p in items) and all(isinstance(o, dict) and key in o for o in orig_list):
            return key
    return None


def strategic_merge_patch(target, patch):
    """Returns the patched copy of target (see the module comment for what is approximated)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    orders = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            result[key] = strategic_merge_patch(result.get(key), value)
        elif isinstance(value, list) and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value)
        else:
            result[key] = _strip_directives(copy.deepcopy(value))
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(result[field], order)
    return result


def _merge_list(orig, patch):
    key = _merge_key(orig, patch)
    if key is None:
        return _strip_directives(copy.deepcopy(patch))
    out = copy.deepcopy(orig)
    for p in patch:
        idx = next((i for i, o in enumerate(out) if o.get(key) == p[key]), None)
        if p.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
        elif idx is None:
            out.append(_strip_directives(copy.deepcopy(p)))
        else:
            out[idx] = strategic_merge_patch(out[idx], p)
    return out


def _apply_order(items, order):
    if not order or not all(isinstance(o, dict) and len(o) == 1 for o in order):
        return items
    (key,) = order[0].keys()
    rank = {o.get(key): i for i, o in enumerate(order)}
    return sorted(items, key=lambda it: rank.get(it.get(key) if isinstance(it, dict) else None,
                                                 len(rank)))


def _strip_directives(value):
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts):
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise PatchError("path element %r not found" % p)
            cur = cur[p]
        elif isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError):
                raise PatchError("array index %r out of range" % p)
        else:
            raise PatchError("cannot descend into a scalar at %r" % p)
    return cur


def _add(doc, parts, value):
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                i = int(last)
            except ValueError:
                raise PatchError("invalid array index %r" % last)
            if i < 0 or i > len(parent):
                raise PatchError("array index %d out of range" % i)
            parent.insert(i, value)
    else:
        raise PatchError("cannot add to a scalar")
    return doc


def _remove(doc, parts):
    if not parts:
        raise PatchError("cannot remove the whole document")
    parent = _walk(doc, parts[:-1])
    last = parts[-1]
    try:
        if isinstance(parent, dict):
            return parent.pop(last) if last in parent else _raise("path %r not found" % last)
        if isinstance(parent, list):
            return parent.pop(int(last))
    except (ValueError, IndexError):
        pass
    raise PatchError("cannot remove %r" % "/".join(parts))


def _raise(msg):
    raise PatchError(msg)


def json_patch(target, ops):
    """RFC 6902: returns the patched copy of target; raises PatchError."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError("each JSON patch operation needs op and path")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _walk(doc, parts)
            if not parts:
                doc = copy.deepcopy(op.get("value"))
            else:
                _remove(doc, parts)
                doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_walk(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _walk(doc, parts) != op.get("value"):
                raise PatchError("test operation failed at %r" % op["path"])
        else:
            raise PatchError("unknown JSON patch operation %r" % kind)
    return doc
