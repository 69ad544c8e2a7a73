#!/usr/bin/env python3
"""Self-test of tools/check_layers.py (ctest layering_selftest): each rule
fails on a small source tree that breaks it, and a tree that keeps them all
passes, so a rule that silently stopped matching would show here."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

TOOLS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
import check_layers  # noqa: E402


class Tree:
    """A throwaway source tree: a top CMakeLists.txt with the module list and
    files under src/."""

    def __init__(self, modules="base kvcache engine server gateway"):
        self._dir = tempfile.TemporaryDirectory()
        self.root = pathlib.Path(self._dir.name)
        (self.root / "CMakeLists.txt").write_text(f"foreach(module {modules})\nendforeach()\n")
        (self.root / "src").mkdir()

    def add(self, path: str, *includes: str, body: str = "") -> None:
        f = self.root / "src" / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("".join(f'#include "{i}"\n' for i in includes) + body)

    def run(self) -> tuple[int, str]:
        r = subprocess.run([sys.executable, str(TOOLS / "check_layers.py"), str(self.root)],
                           capture_output=True, text=True)
        return r.returncode, r.stdout

    def close(self):
        self._dir.cleanup()


class CheckLayersTest(unittest.TestCase):
    def setUp(self):
        self.t = Tree()
        # A clean base: headers, their .cc files, includes downwards only.
        self.t.add("base/status.h")
        self.t.add("kvcache/block_hash.h", "base/status.h")
        self.t.add("kvcache/block_hash.cc", "kvcache/block_hash.h")
        self.t.add("engine/block_manager.h", "kvcache/block_hash.h")
        self.t.add("engine/block_manager.cc", "engine/block_manager.h")
        self.t.add("gateway/pool.h", "kvcache/block_hash.h")
        self.t.add("gateway/pool.cc", "gateway/pool.h")
        self.t.add("gateway/routing.h", "gateway/pool.h")
        self.t.add("gateway/routing.cc", "gateway/routing.h")

    def tearDown(self):
        self.t.close()

    def test_a_clean_tree_passes(self):
        rc, out = self.t.run()
        self.assertEqual(rc, 0, out)
        self.assertIn("0 violations", out)

    def test_a_lower_module_including_a_higher_one_fails(self):
        self.t.add("kvcache/cache_events.h", "engine/block_manager.h")
        rc, out = self.t.run()
        self.assertEqual(rc, 1)
        self.assertIn("src/kvcache/cache_events.h:1: kvcache includes engine (a higher layer)", out)

    def test_the_gateway_including_the_engine_or_server_fails(self):
        self.t.add("gateway/prefix_index.cc", "engine/block_manager.h", "server/backend.h", "kvcache/block_hash.h")
        self.t.add("server/backend.h")
        rc, out = self.t.run()
        self.assertEqual(rc, 1)
        self.assertIn("src/gateway/prefix_index.cc:1: gateway must not include engine", out)
        self.assertIn("src/gateway/prefix_index.cc:2: gateway must not include server", out)
        self.assertNotIn("prefix_index.cc:3", out)  # kvcache is allowed
        self.assertIn("2 violations", out)

    def test_a_cycle_through_a_cc_file_fails_with_its_steps(self):
        # pool.cc -> routing.h -> pool.h: no header cycle, but two components
        # that depend on each other.
        self.t.add("gateway/pool.cc", "gateway/pool.h", "gateway/routing.h")
        rc, out = self.t.run()
        self.assertEqual(rc, 1)
        self.assertIn("include cycle in gateway among gateway/pool, gateway/routing", out)
        self.assertIn("src/gateway/pool.cc:2: #include \"gateway/routing.h\"", out)
        self.assertIn("src/gateway/routing.h:1: #include \"gateway/pool.h\"", out)

    def test_every_cycle_is_reported_and_split_parts_count(self):
        # proxy_stream.cc (no header of its own) is part of proxy.
        self.t.add("gateway/gateway.h")
        self.t.add("gateway/gateway.cc", "gateway/gateway.h", "gateway/proxy.h")
        self.t.add("gateway/proxy.h")
        self.t.add("gateway/proxy.cc", "gateway/proxy.h")
        self.t.add("gateway/proxy_stream.cc", "gateway/proxy.h", "gateway/gateway.h")
        self.t.add("engine/a.h", "engine/b.h")
        self.t.add("engine/b.h")
        self.t.add("engine/b.cc", "engine/b.h", "engine/a.h")
        rc, out = self.t.run()
        self.assertEqual(rc, 1)
        self.assertIn("include cycle in gateway among gateway/gateway, gateway/proxy", out)
        self.assertIn("src/gateway/proxy_stream.cc:2", out)
        self.assertIn("include cycle in engine among engine/a, engine/b", out)
        self.assertIn("2 violations", out)

    def test_tests_and_private_headers_make_no_cycle(self):
        # A test including its subject and more is no component; X_internal.h
        # is X's own.
        self.t.add("gateway/pool_test.cc", "gateway/pool.h", "gateway/routing.h")
        self.t.add("gateway/routing_internal.h", "gateway/routing.h")
        self.t.add("gateway/routing.cc", "gateway/routing.h", "gateway/routing_internal.h")
        rc, out = self.t.run()
        self.assertEqual(rc, 0, out)

    def test_fakes_outside_testing_folders_fail(self):
        self.t.add("server/fake_backend.cc")
        self.t.add("engine/runner.h", body="namespace kvs {\nclass FakeRunner : public Runner {\n};\n}\n")
        self.t.add("bench/testing/fake_openai_server.h", body="class FakeOpenAiServer {\n};\n")
        self.t.add("bench/text_test.cc", body="class FakeCounter {\n};\n")
        self.t.add("engine/engine.h", body="class FakeRunner;  // a declaration only\n")
        rc, out = self.t.run()
        self.assertEqual(rc, 1)
        self.assertIn("src/server/fake_backend.cc: a test fake's file outside a testing/ folder", out)
        self.assertIn("src/engine/runner.h: defines test fake FakeRunner", out)
        self.assertNotIn("bench/testing", out)
        self.assertNotIn("text_test.cc", out)
        self.assertNotIn("engine.h", out)
        self.assertIn("2 violations", out)


if __name__ == "__main__":
    unittest.main()
