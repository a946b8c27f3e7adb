#!/usr/bin/env python3
"""Many snippets at once with asyncio, each with a deadline; a task that is
cancelled takes its sandbox with it.

    python3 examples/async_many.py [--rootfs DIR --language bash]
"""
import argparse
import asyncio

import nsbox


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rootfs")
    ap.add_argument("--language", default="python", choices=sorted(nsbox.LANGUAGES))
    a = ap.parse_args()
    sb = nsbox.Sandbox(rootfs=a.rootfs, timeout=30) if a.rootfs else nsbox.Sandbox(timeout=30)
    snippet = "print(%d ** 2)" if a.language == "python" else "echo $((%d * %d))"
    codes = [snippet % ((i,) * snippet.count("%d")) for i in range(8)]
    results = await asyncio.gather(*(sb.arun_code(c, a.language) for c in codes))
    print([r.stdout.strip() for r in results])
    slow = "import time; time.sleep(60)" if a.language == "python" else "sleep 60"
    try:
        await asyncio.wait_for(sb.arun_code(slow, a.language), timeout=1)
    except asyncio.TimeoutError:
        print("cancelled after 1 s: the sandbox is gone")


if __name__ == "__main__":
    asyncio.run(main())
