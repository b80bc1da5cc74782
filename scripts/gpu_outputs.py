"""Reading a GPU call's output folder (the scripts' OUT, as written there or fetched here): the
JSON documents in it and in its raw.tar.xz, by file name without `.json`."""
import json
import os
import tarfile


def texts(out):
    """{name: text} of every JSON file in OUT and in OUT/raw.tar.xz."""
    docs = {}
    archive = os.path.join(out, "raw.tar.xz")
    if os.path.exists(archive):
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                if m.name.endswith(".json"):
                    docs[os.path.basename(m.name)[:-5]] = t.extractfile(m).read().decode()
    for f in os.listdir(out):
        if f.endswith(".json"):
            with open(os.path.join(out, f), encoding="utf-8") as fh:
                docs[f[:-5]] = fh.read()
    return docs


def last_json(text):
    """The last non-empty line of a command's output, parsed; None if there is none or it is not JSON."""
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
