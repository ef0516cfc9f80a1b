"""The kept threads of plain step bodies under a time limit (reactor/engine/body_threads.py;
docs/concepts.md, "Time limits"): an idle thread is reused, a busy one never delays another
body, and nothing a call raises ends a thread."""

from __future__ import annotations

import threading

from reactor.engine import body_threads

_MEET = 10.0


def _run(call_in: list[str]) -> threading.Event:
    done = threading.Event()

    def call() -> None:
        call_in.append(threading.current_thread().name + f"#{threading.get_ident()}")
        done.set()

    body_threads.submit(call)
    assert done.wait(_MEET)
    return done


def test_an_idle_body_thread_is_reused() -> None:
    seen: list[str] = []
    _run(seen)
    idle = threading.Event()
    # the thread puts itself back on the idle list right after the call: wait for it
    for _ in range(1000):
        with body_threads._lock:
            if body_threads._idle:
                idle.set()
                break
        threading.Event().wait(0.001)
    assert idle.is_set()
    _run(seen)
    assert seen[0] == seen[1] and seen[0].startswith("reactor-step-body")


def test_a_hung_body_never_delays_another() -> None:
    release = threading.Event()
    hung = threading.Event()

    def hang() -> None:
        hung.set()
        release.wait(_MEET)

    body_threads.submit(hang)
    try:
        assert hung.wait(_MEET)
        seen: list[str] = []
        _run(seen)  # runs at once, on another thread
        assert len(seen) == 1
    finally:
        release.set()


def test_a_call_that_raises_leaves_its_thread_serving() -> None:
    raised = threading.Event()

    def boom() -> None:
        raised.set()
        raise KeyboardInterrupt

    body_threads.submit(boom)
    assert raised.wait(_MEET)
    seen: list[str] = []
    _run(seen)
    assert len(seen) == 1
