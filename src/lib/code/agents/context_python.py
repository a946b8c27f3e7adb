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
        flush()
        signal.signal(signal.SIGINT, on_sigint)
        send({"id": rid, "status": status, "exit_code": exit_code, "error": error})


_nsbox_agent()
