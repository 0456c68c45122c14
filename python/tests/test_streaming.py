"""Streaming, asyncio, callbacks, cancellation and concurrent batches."""
import asyncio
import threading
import time

import pytest

from openautoglm import TextIteratorStreamer

PROMPTS = ["Once upon a time", "Lily and Ben", "The sun was", "One day, a little", "Tom had a big", "The cat",
           "In the park", "Mom said"]


def eventually(cond, seconds=60):
    """Polls `cond` every few milliseconds until it holds or `seconds` passed; whether it held.
    Tests order events by a state the engine reports, never by a sleep that assumes it."""
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            return cond()
        time.sleep(0.005)
    return True


def running(model):
    return model.stats()["running"]


def idle(model):
    """Waits until the engine runs nothing: its gauge follows a finished request at the next
    step, so a test that then waits for its own request to run is not fooled by the last one."""
    assert eventually(lambda: running(model) == 0), "the engine never went idle"


def plain_text(model, prompt, n=48):
    return model.tokenizer.decode(model.generate(prompt, max_new_tokens=n)[len(model.tokenizer.encode(prompt)):],
                                  skip_special_tokens=True)


def test_stream_pieces_make_the_generated_text(stories):
    pieces = list(stories.stream("Once upon a time", max_new_tokens=48))
    assert len(pieces) > 5
    assert "".join(pieces) == plain_text(stories, "Once upon a time")


def test_text_iterator_streamer_from_another_thread(stories):
    streamer = TextIteratorStreamer(timeout=60)
    worker = threading.Thread(target=stories.generate, args=("Once upon a time",),
                              kwargs={"max_new_tokens": 48, "streamer": streamer})
    worker.start()
    text = "".join(streamer)
    worker.join()
    assert text == plain_text(stories, "Once upon a time")


def test_async_iteration_gives_the_same_text(stories):
    async def collect():
        return "".join([p async for p in stories.agenerate("Once upon a time", max_new_tokens=48)])

    assert asyncio.run(collect()) == plain_text(stories, "Once upon a time")


def test_async_tasks_run_together_and_cancel(stories):
    async def main():
        task = asyncio.create_task(collect_forever())
        deadline = time.monotonic() + 60
        while not running(stories):  # cancelled once it runs in the engine
            assert time.monotonic() < deadline, "the request never ran"
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return stories.stats()

    async def collect_forever():
        async for _ in stories.agenerate("Once upon a time", max_new_tokens=100000, ignore_eos=True):
            pass

    idle(stories)
    asyncio.run(main())
    assert eventually(lambda: running(stories) == 0), "the cancelled request never left the engine"


def test_callbacks_deliver_the_text_and_the_future_its_result(stories):
    pieces, done = [], threading.Event()
    outcome = {}
    future = stories.submit("Once upon a time", max_new_tokens=48, on_token=pieces.append,
                            on_done=lambda r: (outcome.setdefault("result", r), done.set()))
    result = future.result(timeout=60)
    assert done.wait(10)
    assert "".join(pieces) == result.text == outcome["result"].text == plain_text(stories, "Once upon a time")
    assert result.finish_reason == "length" and result.completion_tokens == 48


def test_cancelling_a_future_stops_the_request_within_a_step(stories):
    errors = []
    idle(stories)
    future = stories.submit("Once upon a time", max_new_tokens=100000, ignore_eos=True, on_error=errors.append)
    assert eventually(lambda: running(stories) == 1), "the request never ran"
    assert future.cancel() and future.cancelled()
    steps = stories.stats()["steps"]  # after the cancel: a stalled test thread adds no steps here
    assert eventually(lambda: running(stories) == 0), "the cancelled request never left the engine"
    assert stories.stats()["steps"] - steps <= 3  # a step or two in flight, then it is gone


def test_a_batch_equals_each_prompt_alone_and_runs_concurrently(stories):
    n = 32
    steps = stories.stats()["steps"]
    alone = [stories.generate(p, max_new_tokens=n) for p in PROMPTS]
    one_by_one = stories.stats()["steps"] - steps
    steps = stories.stats()["steps"]
    together = stories.generate(PROMPTS, max_new_tokens=n)
    batched = stories.stats()["steps"] - steps
    assert together == alone
    # One after another, each prompt takes its own n steps; together they share the steps.
    assert one_by_one >= 8 * n and batched < 2 * n, (batched, one_by_one)


def test_keyboard_interrupt_cancels_the_generation(stories):
    import _thread

    def interrupt_while_it_runs():  # as Ctrl-C would, in the main thread, once the request runs
        if eventually(lambda: running(stories) > 0):
            _thread.interrupt_main()

    idle(stories)
    interrupter = threading.Thread(target=interrupt_while_it_runs)
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        stories.generate("Once upon a time", max_new_tokens=100000, ignore_eos=True)
    interrupter.join()
    assert eventually(lambda: running(stories) == 0), "the interrupted request was left running"
    assert stories.generate("Once", max_new_tokens=4)  # and the model goes on working
