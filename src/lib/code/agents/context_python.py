# nsbox code context, Python agent: run as `python3 -I -u -c <this text>` in
# the sandbox, fd 3 a connected stream socket to the host. It takes cells
# from the host and runs them one after another in one namespace, as an
# interactive interpreter does. Protocol: docs/contexts-protocol.md. One
# self-contained text (3.9+ stdlib): nothing of the nsbox package exists in
# the sandbox. Everything it uses is bound before the first cell, so a cell
# that rebinds json.dumps or sys.stdout does not break the channel.
def _nsbox_agent():
    import __future__, ast, builtins, json, linecache, os, platform, signal, struct, sys, traceback, types
    fd, limit = 3, 16 << 20
    dumps, loads, pack, unpack = json.dumps, json.loads, struct.pack, struct.unpack
    read, write, exit_ = os.read, os.write, os._exit
    mine = globals()

    def die(why):
        # The host broke the protocol (or lies): fail closed, distinctly.
        try:
            write(2, ("nsbox context agent: %s\n" % why).encode())
        finally:
            exit_(2)

    def recv(n, start):
        parts, got = [], 0
        while got < n:
            b = read(fd, min(n - got, 1 << 20))
            if not b:
                if start and not got:
                    return None
                die("the host closed the channel inside a frame")
            parts.append(b)
            got += len(b)
        return b"".join(parts)

    def send(obj):
        data = dumps(obj, ensure_ascii=True).encode()
        data = memoryview(pack(">I", len(data)) + data)
        while data:
            data = data[write(fd, data):]

    def text(s):
        # Replies are strict UTF-8 JSON without NUL (jansson's defaults).
        s = s.encode("utf-8", "replace").decode("utf-8").replace("\0", "?")
        return s if len(s) <= 4000 else s[:4000] + "..."

    def describe(e):
        t = type(e)
        name = t.__qualname__ if t.__module__ in ("builtins", "__main__") else t.__module__ + "." + t.__qualname__
        try:
            msg = e.msg if isinstance(e, SyntaxError) and e.msg else str(e)
        except BaseException:
            msg = "<exception str() failed>"
        return text(name + (": " + msg if msg else ""))

    def flush():
        for f in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                f.flush()
            except BaseException:
                pass

    def show(e):
        # The traceback without the agent's frames (for a SyntaxError:
        # none); through sys.excepthook if a cell set one, else through the
        # traceback module, which finds the cells' lines in linecache.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_globals is mine:
            tb = tb.tb_next
        e.__traceback__ = tb
        try:
            if sys.excepthook is not sys.__excepthook__:
                sys.excepthook(type(e), e, tb)
            else:
                traceback.print_exception(type(e), e, tb)
        except BaseException:
            write(2, (describe(e) + "\n").encode())

    # SIGINT is the host's interrupt: a KeyboardInterrupt while a cell runs,
    # ignored while the agent waits or reports (it must neither kill the
    # agent nor reach the next cell). The handler, not SIG_IGN, so that a
    # signal landing between "cell ends" and "flag cleared" is still a
    # defined outcome (the cell reports interrupted).
    running = [False]

    def on_sigint(signum, frame):
        if running[0]:
            raise KeyboardInterrupt

    # What a cell sees: a fresh __main__ module (pickle and friends look
    # classes up in sys.modules["__main__"]), argv [''] and the working
    # directory first on sys.path, as `python3` typed at a shell gives.
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __loader__=None, __spec__=None, __package__=None)
    ns = main.__dict__
    old_main = sys.modules.get("__main__")  # kept alive: our globals
    sys.modules["__main__"] = main
    sys.argv[:] = [""]
    sys.path.insert(0, "")
    os.set_inheritable(fd, False)  # a cell's children do not get the channel
    future = 0  # __future__ imports carry over to later cells
    futures = 0
    for f in __future__.all_feature_names:
        futures |= getattr(__future__, f).compiler_flag
    count = 0

    # Rich results (the IPython display protocol, without IPython): the
    # cell's last expression and each display(obj) become a bundle of
    # representations by MIME type; matplotlib draws off screen (Agg) and
    # each figure left open at the end of a cell is a PNG. Binary data is
    # base64 (JSON carries text). Bounded: a cell's results at most
    # RESULTS_MAX bytes, the rest dropped and said so.
    import base64, io
    b64 = base64.b64encode
    results, results_size = [], [0]
    RESULTS_MAX = 8 << 20
    reprs = (("text/html", "_repr_html_"), ("text/markdown", "_repr_markdown_"), ("image/svg+xml", "_repr_svg_"),
             ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"), ("text/latex", "_repr_latex_"),
             ("application/json", "_repr_json_"))

    def bundle(obj):
        out = {}
        try:
            mb = getattr(obj, "_repr_mimebundle_", None)
            got = mb() if callable(mb) else None
            if isinstance(got, tuple):
                got = got[0]
            if isinstance(got, dict):
                out.update((k, v) for k, v in got.items() if isinstance(k, str))
        except Exception:
            pass
        for mime, meth in reprs:
            if mime in out:
                continue
            try:
                f = getattr(obj, meth, None)
                v = f() if callable(f) else None
            except Exception:
                v = None
            if isinstance(v, tuple):
                v = v[0]
            if v is not None:
                out[mime] = v
        try:
            out.setdefault("text/plain", repr(obj))
        except Exception:
            out.setdefault("text/plain", "<repr failed>")
        enc = {}
        for mime, v in out.items():
            if isinstance(v, (bytes, bytearray)):
                enc[mime] = b64(bytes(v)).decode()
            elif mime == "application/json" and not isinstance(v, str):
                try:
                    enc[mime] = dumps(v)
                except (TypeError, ValueError):
                    pass
            elif isinstance(v, str):
                enc[mime] = text(v) if mime == "text/plain" else v
        return enc

    def keep(b):
        size = sum(len(k) + len(v) for k, v in b.items())
        if results_size[0] + size > RESULTS_MAX:
            b = {"text/plain": "[result dropped: the cell's results passed %d bytes]" % RESULTS_MAX}
            size = 0
        results_size[0] += size
        results.append(b)

    def display(*objs, **_):
        for o in objs:
            keep(bundle(o))

    builtins.display = display
    os.environ.setdefault("MPLBACKEND", "Agg")
    import warnings
    warnings.filterwarnings("ignore", message=".*is non-interactive, and thus cannot be shown")

    def figures():
        # The figures a cell left open, each as a PNG, then closed.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            for num in plt.get_fignums():
                fig = plt.figure(num)
                buf = io.BytesIO()
                fig.savefig(buf, format="png")
                keep({"image/png": b64(buf.getvalue()).decode(), "text/plain": repr(fig)})
            plt.close("all")
        except Exception as e:
            write(2, ("nsbox context: a figure could not be drawn: %s\n" % describe(e)).encode())

    def run(code):
        nonlocal future
        name = "<cell %d>" % count
        lines = code.splitlines(True)
        linecache.cache[name] = (len(code), None, lines, name)
        tree = compile(code, name, "exec", ast.PyCF_ONLY_AST | future, True)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = compile(tree, name, "exec", future, True)
        future |= body.co_flags & futures
        exec(body, ns)
        if last is not None:
            value = eval(compile(last, name, "eval", future, True), ns)
            if value is not None:
                print(repr(value))
                if not (value.__class__.__module__ == "matplotlib.figure" and plt_open(value)):
                    keep(bundle(value))

    def plt_open(fig):
        # A figure shown as the last expression is returned once, as a PNG.
        plt = sys.modules.get("matplotlib.pyplot")
        return plt is not None and getattr(fig, "number", None) in plt.get_fignums()

    signal.signal(signal.SIGINT, on_sigint)
    send({"ready": True, "lang": "python", "version": platform.python_version()})
    while True:
        head = recv(4, True)
        if head is None:
            flush()
            return
        n = unpack(">I", head)[0]
        if n > limit:
            die("frame of %d bytes (over %d)" % (n, limit))
        try:
            req = loads(recv(n, False).decode("utf-8"))
        except ValueError:
            die("a frame that is not UTF-8 JSON")
        if not isinstance(req, dict):
            die("a frame that is not an object")
        rid, code = req.get("id"), req.get("code")
        if type(rid) is not int or abs(rid) >= 1 << 53 or type(code) is not str:
            die("a cell needs an integer id and a string code")
        count += 1
        status, exit_code, error = "ok", 0, None
        del results[:]
        results_size[0] = 0
        try:
            signal.signal(signal.SIGINT, on_sigint)
            running[0] = True
            try:
                run(code)
            finally:
                running[0] = False
        except KeyboardInterrupt as e:
            status, exit_code, error = "interrupted", 130, "KeyboardInterrupt"
            show(e)
        except SystemExit as e:
            c = e.code
            status, exit_code = "exit", 0
            if c is None:
                pass
            elif type(c) is int or type(c) is bool:
                exit_code = int(c) & 0xFF
            else:
                exit_code = 1
                try:
                    print(c, file=sys.stderr)
                except BaseException:
                    pass
        except BaseException as e:
            status, exit_code, error = "error", 1, describe(e)
            show(e)
        figures()
        flush()
        signal.signal(signal.SIGINT, on_sigint)
        send({"id": rid, "status": status, "exit_code": exit_code, "error": error, "results": results})


_nsbox_agent()
