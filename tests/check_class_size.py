#!/usr/bin/env python3
# Lists every class or struct of our own code with more than --max (25) non-static data
# members and exits 1 if there is one (issue 14: "no class with more than about 25 data
# members"). Run it through tests/check_class_size.sh, which finds a Python with libclang.
#
#   check_class_size.py SOURCE_ROOT [BUILD_DIR]     check the tree
#   check_class_size.py --self-test                 plant classes in a scratch tree
#
# How it counts: with clang's own parser (libclang, Debian package python3-clang-14), the
# FIELD_DECLs of each class, struct or class template definition: `int a_, b_;` is two
# members, a static member or a member of a nested struct does not count for the
# enclosing class (a member whose type is that struct counts once).
#
# What it reads: the .cc files of common/ stoc/ logc/ ltc/ coordinator/ client/ with the
# flags of BUILD_DIR/compile_commands.json (so code behind -DNOVA_HAVE_VERBS=1 is seen),
# then every header of those folders no such .cc included, on its own. Without a compile
# database every .h and .cc is parsed with -std=c++20 -I SOURCE_ROOT. Tests, benchmarks,
# *_test.cc, *_itest.cc and fuzzers are left out. Function bodies are skipped (a class
# defined inside a function is not seen).
#
# Exempt: a plain aggregate of settings or figures -- a name ending in Stats, Options,
# Metrics, Counters, Config or Settings whose data members are all public. Its size is
# its schema, not a sign of a class doing several jobs. A class with such a name but
# private or protected data is not exempt.
#
# A parse error in a file it reads fails the check (a class it could not see is not a
# class that passed).
import os
import shlex
import sys
import tempfile

FOLDERS = ("common", "stoc", "logc", "ltc", "coordinator", "client")
EXEMPT_SUFFIXES = ("Stats", "Options", "Metrics", "Counters", "Config", "Settings")
DEFAULT_MAX = 25


def import_cindex():
    try:
        import clang.cindex as cindex  # noqa: PLC0415
    except ImportError:
        sys.stderr.write("check_class_size: no libclang Python bindings: install the Debian "
                         "package python3-clang-14 (apt-get install python3-clang-14)\n")
        sys.exit(2)
    return cindex


def is_ours(path, root):
    rel = os.path.relpath(path, root)
    if rel.startswith(".."):
        return False
    parts = rel.split(os.sep)
    if parts[0] not in FOLDERS:
        return False
    name = parts[-1]
    if name.endswith(("_test.cc", "_itest.cc", "_fuzz.cc", "_fuzzer.cc")):
        return False
    return name.endswith((".h", ".cc"))


def our_files(root):
    out = []
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for n in names:
                p = os.path.join(dirpath, n)
                if is_ours(p, root):
                    out.append(os.path.realpath(p))
    return sorted(out)


def flags_of(command, directory):
    """The -D, -U, -I, -isystem and -std flags of a compile command."""
    args = shlex.split(command) if isinstance(command, str) else list(command)
    out = []
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("-I", "-isystem", "-D", "-U", "-include"):
            if i + 1 < len(args):
                v = args[i + 1]
                if a in ("-I", "-isystem") and not os.path.isabs(v):
                    v = os.path.join(directory, v)
                out += [a, v]
            i += 2
            continue
        if a.startswith("-I") and len(a) > 2:
            v = a[2:]
            out.append("-I" + (v if os.path.isabs(v) else os.path.join(directory, v)))
        elif a.startswith(("-D", "-U", "-std=")):
            out.append(a)
        i += 1
    return out


def load_database(build_dir, root):
    """file -> flags for our .cc files in BUILD_DIR/compile_commands.json, or None."""
    if not build_dir:
        return None
    path = os.path.join(build_dir, "compile_commands.json")
    if not os.path.exists(path):
        return None
    import json  # noqa: PLC0415
    with open(path) as f:
        entries = json.load(f)
    db = {}
    for e in entries:
        directory = e.get("directory", build_dir)
        file = os.path.realpath(os.path.join(directory, e["file"]))
        if not is_ours(file, root) or not file.endswith(".cc"):
            continue
        cmd = e.get("command") or e.get("arguments")
        db[file] = flags_of(cmd, directory)
    return db


class Counter:
    def __init__(self, cindex, root, limit):
        self.cindex = cindex
        self.root = os.path.realpath(root)
        self.limit = limit
        self.index = cindex.Index.create()
        self.classes = {}  # (file, line, name) -> (members, non_public, qualified name)
        self.errors = []
        K = cindex.CursorKind
        self.class_kinds = {K.CLASS_DECL, K.STRUCT_DECL, K.CLASS_TEMPLATE,
                            K.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION}
        self.scope_kinds = self.class_kinds | {K.NAMESPACE, K.UNEXPOSED_DECL,
                                               K.LINKAGE_SPEC}

    def parse(self, path, flags):
        opts = (self.cindex.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES |
                self.cindex.TranslationUnit.PARSE_INCOMPLETE)
        args = ["-x", "c++"] + flags
        if not any(f.startswith("-std=") for f in flags):
            args.append("-std=c++20")
        try:
            tu = self.index.parse(path, args=args, options=opts)
        except self.cindex.TranslationUnitLoadError as e:
            self.errors.append("%s: cannot parse: %s" % (path, e))
            return set()
        for d in tu.diagnostics:
            if d.severity >= self.cindex.Diagnostic.Error:
                self.errors.append("%s: %s" % (path, d))
        self.walk(tu.cursor, "")
        return {os.path.realpath(i.include.name) for i in tu.get_includes()}

    def walk(self, cursor, scope):
        for c in cursor.get_children():
            if c.kind not in self.scope_kinds:
                continue
            loc = c.location
            if loc.file is None:
                continue
            file = os.path.realpath(loc.file.name)
            if not file.startswith(self.root + os.sep):
                continue  # system and third-party headers
            name = c.spelling or "(anonymous)"
            qualified = scope + "::" + name if scope else name
            if c.kind in self.class_kinds and c.is_definition() and is_ours(file, self.root):
                self.count(c, file, qualified)
            self.walk(c, qualified)

    def count(self, c, file, qualified):
        members = 0
        non_public = 0
        for f in c.get_children():
            if f.kind == self.cindex.CursorKind.FIELD_DECL:
                members += 1
                if f.access_specifier != self.cindex.AccessSpecifier.PUBLIC:
                    non_public += 1
        key = (os.path.relpath(file, self.root), c.location.line, qualified)
        self.classes[key] = (members, non_public)

    def exempt(self, qualified, non_public):
        return qualified.split("::")[-1].endswith(EXEMPT_SUFFIXES) and non_public == 0


def run(root, build_dir, limit, verbose):
    cindex = import_cindex()
    counter = Counter(cindex, root, limit)
    files = our_files(counter.root)
    db = load_database(build_dir, counter.root)
    seen = set()
    if db:
        # Headers no .cc includes are parsed with the union of the database's flags.
        common, keys = [], set()
        for flags in db.values():
            i = 0
            while i < len(flags):
                n = 2 if flags[i] in ("-I", "-isystem", "-D", "-U", "-include") else 1
                group = tuple(flags[i:i + n])
                i += n
                if group[0] == "-include" or group in keys:
                    continue
                if group[0].startswith("-std=") and any(k[0].startswith("-std=") for k in keys):
                    continue
                keys.add(group)
                common += list(group)
        for path in files:
            if path.endswith(".cc") and path in db:
                seen |= counter.parse(path, db[path])
                seen.add(path)
        rest = [p for p in files if p not in seen and p.endswith(".h")]
        for path in rest:
            counter.parse(path, common)
    else:
        for path in files:
            counter.parse(path, ["-std=c++20", "-I" + counter.root])

    over, exempt = [], []
    for (file, line, name), (members, non_public) in sorted(counter.classes.items()):
        if members <= limit:
            continue
        (exempt if counter.exempt(name, non_public) else over).append(
            "%s:%d: %s has %d data members" % (file, line, name, members))
    if verbose:
        for (file, line, name), (members, _) in sorted(counter.classes.items(),
                                                       key=lambda kv: -kv[1][0]):
            if members > 15:
                print("  %3d  %s (%s:%d)" % (members, name, file, line))
    for e in counter.errors:
        print("parse error: " + e)
    for e in exempt:
        print("exempt (plain aggregate): " + e)
    for o in over:
        print(o)
    print("check_class_size: %d classes read, %d over %d data members%s" %
          (len(counter.classes), len(over), limit,
           ", %d parse errors" % len(counter.errors) if counter.errors else ""))
    return 1 if over or counter.errors else 0


PLANTED = """#pragma once
namespace nova {
class Planted26 {
 public:
  int Get() const { return m0_; }
 private:
  int m0_, m1_, m2_, m3_, m4_, m5_, m6_, m7_, m8_, m9_, m10_, m11_, m12_;
  int m13_, m14_, m15_, m16_, m17_, m18_, m19_, m20_, m21_, m22_, m23_, m24_;
  int m25_;
  static int not_counted_;
};
struct Planted25 {
  int m0, m1, m2, m3, m4, m5, m6, m7, m8, m9, m10, m11, m12, m13, m14, m15, m16, m17, m18;
  int m19, m20, m21, m22, m23;
  struct Inner { int a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w; };
  Inner inner;  // counts once: 25 in all
};
struct PlantedStats {  // a plain aggregate: exempt
  long c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15, c16, c17;
  long c18, c19, c20, c21, c22, c23, c24, c25, c26, c27, c28, c29;
};
class PlantedOptions {  // private state: not exempt, whatever its name
  int o0_, o1_, o2_, o3_, o4_, o5_, o6_, o7_, o8_, o9_, o10_, o11_, o12_, o13_, o14_;
  int o15_, o16_, o17_, o18_, o19_, o20_, o21_, o22_, o23_, o24_, o25_;
};
template <typename T>
class PlantedTemplate {
  T t0_, t1_, t2_, t3_, t4_, t5_, t6_, t7_, t8_, t9_, t10_, t11_, t12_, t13_, t14_;
  T t15_, t16_, t17_, t18_, t19_, t20_, t21_, t22_, t23_, t24_, t25_, t26_;
};
}  // namespace nova
"""

PLANTED_CC = """namespace {
struct LocalToTheFile {
  int a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z;
};
}  // namespace
"""

PLANTED_TEST = """struct InATest {
  int a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z;
};
"""


def self_test():
    import contextlib  # noqa: PLC0415
    import io  # noqa: PLC0415
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "common"))
        os.makedirs(os.path.join(tmp, "tests"))
        with open(os.path.join(tmp, "common", "planted.h"), "w") as f:
            f.write(PLANTED)
        with open(os.path.join(tmp, "common", "planted.cc"), "w") as f:
            f.write(PLANTED_CC)
        with open(os.path.join(tmp, "common", "planted_test.cc"), "w") as f:
            f.write(PLANTED_TEST)
        with open(os.path.join(tmp, "tests", "planted.h"), "w") as f:
            f.write(PLANTED_TEST)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = run(tmp, None, DEFAULT_MAX, False)
        text = out.getvalue()
    expect = {
        "reported": ["nova::Planted26 has 26 data members",
                     "nova::PlantedOptions has 26 data members",
                     "nova::PlantedTemplate has 27 data members",
                     "(anonymous)::LocalToTheFile has 26 data members"],
        "exempt": ["exempt (plain aggregate): common/planted.h:18: nova::PlantedStats has 30"],
        "absent": ["Planted25", "Inner", "InATest", "parse error"],
    }
    failures = []
    for s in expect["reported"] + expect["exempt"]:
        if s not in text:
            failures.append("missing: " + s)
    for s in expect["absent"]:
        if s in text:
            failures.append("should not appear: " + s)
    if rc != 1:
        failures.append("exit status %d, expected 1" % rc)
    if failures:
        print(text)
        print("check_class_size self-test FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("check_class_size self-test passed")
    return 0


def main(argv):
    verbose = "--verbose" in argv
    argv = [a for a in argv if a != "--verbose"]
    limit = DEFAULT_MAX
    for a in list(argv):
        if a.startswith("--max="):
            limit = int(a.split("=", 1)[1])
            argv.remove(a)
    if argv[1:2] == ["--self-test"]:
        return self_test()
    if len(argv) < 2 or len(argv) > 3:
        sys.stderr.write(__doc__ if __doc__ else "usage: check_class_size.py ROOT [BUILD_DIR]\n")
        return 2
    return run(argv[1], argv[2] if len(argv) == 3 else None, limit, verbose)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
