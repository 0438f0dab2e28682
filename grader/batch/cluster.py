"""`cluster` grades a batch on a Dask distributed cluster: `grader batch SUBMISSIONS --out DIR --cluster ADDRESS`.

The batch stays on this machine (the client): it reads each submission once (intake: zips, notebooks), keys
it, skips what is done, writes DIR/<id>.json as each report arrives, then grades.csv, summary.json and the
class report, exactly as a local batch does (`schedule`). Only the grading moves: each submission travels as
JSON (its exercise files, base64, and what intake noted), and each report comes back as JSON text.

On every Dask worker a `SlotPlugin` (`dask_worker`; Dask's own mechanism for per-worker state) keeps one warm
`Slot` per worker thread: the same `grader.batch.slot` process a local batch runs, with torch, pytest, the
collected suites and a sandbox ready, at the worker's own isolation tier, limits and time budget. A worker
whose kit differs from the client's (`dask_worker.fingerprint`), or that cannot isolate what the batch
protects, gets no slots and never offers the resource the grading tasks need: it is refused, in one line.
Each batch has its own plugin and resource, removed when it ends (or, if it was killed outright, once its
slots sat unused for `dask_worker.IDLE_S`).

Faults (`_Dispatch`): a worker that dies mid-submission gives its task back to the scheduler, which runs it
elsewhere (the future ends once, so a report is written once); only workers that died after starting to
grade a submission count against it, and one that ended DEATHS_FOR_A_LIMIT of them is recorded as a limit.
A scheduler that goes away stops the batch (ClusterLost: exit 3) with every report written so far kept, and
a rerun grades the rest.

Dask itself moves the task's function by reference with pickle between the client, the scheduler and the
workers: they are the instructor's machines, one trust domain, and the scheduler must be reachable by them
only (docs/cluster.md): `dask_client` takes a scheduler's address with TLS only, unless the instructor passes
--insecure-cluster, and starts `local:N` with a certificate made for this batch. No student code runs outside a
worker's sandbox.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grader.batch import records
from grader.batch.dask_client import ClusterError, connect, ready
from grader.batch.dask_worker import STARTED, SlotPlugin, describe, fingerprint, grade_on_worker, kit_version
from grader.batch.jobs import Entry, Isolation, Job, Outcome, Result, Status
from grader.batch.plan import Plan
from grader.grade.selection import Selection
from grader.intake.submission import SubmissionInputError, load
from grader.lang import tr

if TYPE_CHECKING:
    from distributed import Client


DEATHS_FOR_A_LIMIT = 2  # workers that died grading one submission before it is recorded as a limit
MAX_SENDS = 6  # times a submission is sent again after workers died holding it, before that is a grader failure
WATCH_S = 5.0  # how long the batch waits for an answer before it looks for submissions no worker took


class ClusterLost(Exception):
    """The scheduler went away mid-batch (exit 3): every report written so far is kept; a rerun grades the rest."""


@dataclass(frozen=True)
class Graded:
    """What came back for one submission: how its grading ended, and its report (None when it has none)."""

    outcome: Outcome
    report: dict[str, Any] | None


def run(plan: Plan, todo: list[Entry], keys: dict[str, str], record: Callable[[Result], None],
        say: Callable[[str], None]) -> None:
    """Grade `todo` on the Dask cluster at `plan.cluster` (the `GradeAll` of a batch with --cluster): intake here,
    grading on its workers, each report written here and recorded as it comes."""
    assert plan.cluster is not None
    address, selection, out, device = plan.cluster, plan.selection, plan.out, plan.device
    ready(address, insecure=plan.insecure_cluster)

    jobs = {}
    for entry in todo:
        path = entry.path.resolve()
        try:
            loaded = load(path)
        except SubmissionInputError as error:  # as a local slot refuses it, with the same report
            record(records.recorded(entry, selection, keys[entry.id], Outcome(Status.REFUSED, str(error)), None, out,
                             device))
            continue
        jobs[entry.id] = Job(str(path), "", list(selection.exercises), selection.suite, plan.timeout_s,
                             plan.isolation, intake=loaded.to_json(), salt=plan.salt, language=plan.language,
                             limits=plan.limits.to_json())
    if not jobs:
        return
    by_id = {entry.id: entry for entry in todo}

    def graded(submission_id: str, answer: Graded) -> None:
        record(records.recorded(by_id[submission_id], selection, keys[submission_id], answer.outcome, answer.report,
                                out, device))

    with connect(address, insecure=plan.insecure_cluster) as client:
        grade(client, jobs, selection, device, plan.isolation, on_graded=graded, say=say)


def grade(client: Client, jobs: dict[str, Job], selection: Selection, device: str, isolation: Isolation,
          on_graded: Callable[[str, Graded], None], say: Callable[[str], None]) -> None:
    """Grade each job (by submission id) on the cluster, calling `on_graded` once per id as each comes back.

    ClusterError (before anything is graded) where no worker can grade the batch; ClusterLost when the
    scheduler goes away.
    """
    expected = fingerprint(selection)
    run_id = uuid.uuid4().hex[:12]
    name = f"attention-kit-{run_id}"  # this batch's plugin and resource: another batch on the cluster has its own
    try:
        client.run_on_scheduler(kit_version)
    except Exception as error:  # the scheduler could not unpickle a function of the kit: it has none
        raise ClusterError(tr("the Dask scheduler cannot load the kit ({error}): install the same kit where it runs",
                              error=f"{type(error).__name__}: {error}".splitlines()[0])) from None
    checks = client.run(describe, list(selection.exercises), selection.suite, expected, isolation,
                        on_error="return")
    able = []
    for address, state in sorted(checks.items()):
        problem = state["problem"] if isinstance(state, dict) else f"{type(state).__name__}: {state}"
        if problem:
            say(tr("grader: not grading on worker {address}: {problem}", address=address, problem=problem))
        else:
            able.append(address)
    if not able:
        raise ClusterError(tr("no worker of the cluster can grade this batch ({count} refused, each said why above)",
                              count=len(checks)) if checks else tr("the cluster has no workers: start some "
                                                                   "(dask worker ADDRESS)"))
    client.register_plugin(SlotPlugin(name, expected, list(selection.exercises), selection.suite, device, isolation),
                           name=name)
    try:
        _Dispatch(client, name, run_id, jobs, on_graded, say).run()
    except OSError as error:  # the scheduler's connection closed (distributed's CommClosedError is an OSError)
        raise ClusterLost(str(error) or type(error).__name__) from None
    finally:
        with contextlib.suppress(Exception):
            client.unregister_worker_plugin(name)


class _Dispatch:
    """Sends the jobs to the cluster and takes their answers, keeping as many on it as it has slots.

    Dask moves a dead worker's task to another worker, and fails it (KilledWorker) once workers died holding it
    more than `allowed-failures` times. Holding is not grading: a task waiting behind another on a worker that
    dies counts a death too. So a KilledWorker is judged here, by the STARTED events of the submission: only a
    worker that died after it started grading it counts, and a submission with DEATHS_FOR_A_LIMIT of them, over
    every time it was sent, is a limit; any other is sent again (up to MAX_SENDS). A task no worker has taken for
    two WATCH_S looks (Dask does not look again at a task waiting for a resource when a restarted worker offers
    it) is judged the same way.
    """

    def __init__(self, client: Client, name: str, run_id: str, jobs: dict[str, Job],
                 on_graded: Callable[[str, Graded], None], say: Callable[[str], None] = print) -> None:
        self.client = client
        self.say = say
        self.told: set[tuple[str, str]] = set()  # (worker, submission) of each worker said to be lost
        self.name = name
        self.run_id = run_id
        self.jobs = jobs
        self.on_graded = on_graded
        self.waiting = collections.deque(jobs)
        self.sent: dict[Any, str] = {}  # future -> submission id
        self.sends: collections.Counter[str] = collections.Counter()  # after a KilledWorker
        self.keys: collections.Counter[str] = collections.Counter()  # every key a submission was sent with
        self.untaken: collections.Counter[Any] = collections.Counter()  # future -> looks that found it untaken
        self.slots, self.counted_at = 0, -math.inf

    def run(self) -> None:
        from distributed import wait
        from distributed.client import FuturesCancelledError

        self.top_up()
        while self.sent:
            try:
                done = wait(list(self.sent), timeout=WATCH_S, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                self.send_untaken_again()
                continue
            except FuturesCancelledError as error:  # only the scheduler cancels what this batch sent
                raise ClusterLost(str(error)) from None
            for future in done:
                self.answer(future)
            self.top_up()

    def top_up(self) -> None:
        """As many submissions on the cluster as it has slots, no more: a worker that dies holds only those it
        was grading, and no queue of others."""
        if time.monotonic() - self.counted_at > WATCH_S / 5:  # a worker that joins is counted within 2 s
            workers = _workers(self.client)
            self.slots, self.counted_at = _slots(workers, self.name), time.monotonic()
            self.tell_of_lost_workers(workers)
        free = max(1, self.slots) - len(self.sent)
        while free > 0 and self.waiting:
            self.send(self.waiting.popleft())
            free -= 1

    def send(self, submission_id: str) -> None:
        self.keys[submission_id] += 1
        future = self.client.submit(grade_on_worker, self.name, self.run_id, submission_id,
                                    self.jobs[submission_id].to_json(), resources={self.name: 1}, pure=False,
                                    key=f"grade-{submission_id}-{self.keys[submission_id]}-{self.run_id}")
        self.sent[future] = submission_id

    def answer(self, future: Any) -> None:
        from distributed.client import FutureCancelledError
        from distributed.scheduler import KilledWorker

        submission_id = self.sent.pop(future)
        self.untaken.pop(future, None)
        holders = frozenset(self.client.who_has([future]).get(future.key, ()))  # the worker that graded it, if any
        try:
            graded = _read(future.result())
        except KilledWorker:
            graded = self.again_or_not(submission_id)
            if graded is None:
                return
        except FutureCancelledError as error:
            raise ClusterLost(str(error)) from None
        except OSError:
            raise
        except Exception as error:  # the task itself broke on its worker: the grader's failure, not the student's
            graded = Graded(Outcome(Status.FAILED, f"{type(error).__name__}: {error}"), None)
        finally:
            future.release()
        self.tell_of_lost_workers(_workers(self.client), submission_id, holders)
        self.on_graded(submission_id, graded)

    def again_or_not(self, submission_id: str) -> Graded | None:
        """Send a submission no worker could finish again (None), or say why it is not: it ended the workers that
        graded it DEATHS_FOR_A_LIMIT times (a limit), or workers died holding it MAX_SENDS times (the grader's)."""
        deaths = self.deaths(submission_id)
        self.sends[submission_id] += 1
        if deaths >= DEATHS_FOR_A_LIMIT:
            return Graded(Outcome(Status.TIMEOUT, tr(
                "grading this submission ended the Dask worker grading it {count} times: recorded as a limit, not "
                "tried again", count=deaths)), None)
        if self.sends[submission_id] >= MAX_SENDS:
            return Graded(Outcome(Status.FAILED, tr(
                "the Dask workers holding this submission died {count} times before it was graded",
                count=self.sends[submission_id])), None)
        self.send(submission_id)
        return None

    def tell_of_lost_workers(self, workers: dict[str, Any], answered: str | None = None,
                             holders: frozenset[str] = frozenset()) -> None:
        """One line for each worker lost while grading a submission of this batch (from the STARTED events, so that
        a worker restarted and killed between two looks is told of too): one gone from the cluster while its
        submission waits, or, as a submission is `answered`, each that started it but does not hold its answer.
        `workers`: the cluster's now, by address."""
        for _, event in self.client.get_events(STARTED):
            if not isinstance(event, dict) or event.get("run") != self.run_id:
                continue
            pair = (str(event.get("worker")), str(event.get("submission")))
            lost = pair[0] not in holders if pair[1] == answered else (
                pair[0] not in workers and pair[1] in self.sent.values())
            if not lost or pair in self.told:
                continue
            self.told.add(pair)
            deaths = sum(1 for _, submission in self.told if submission == pair[1])  # this loss is the how-manieth
            self.say(tr("grader: Dask worker {address} was lost while grading {id}, which is retried on another worker",
                        address=pair[0], id=pair[1]) if deaths < DEATHS_FOR_A_LIMIT else
                     tr("grader: Dask worker {address} was lost while grading {id}, which has now ended {count} "
                        "workers: recorded as a limit", address=pair[0], id=pair[1], count=deaths))

    def deaths(self, submission_id: str) -> int:
        """How many workers started grading this submission in this batch, never to answer: each died."""
        return sum(1 for _, event in self.client.get_events(STARTED)
                   if isinstance(event, dict) and event.get("run") == self.run_id
                   and event.get("submission") == submission_id)

    def send_untaken_again(self) -> None:
        taken = {key for keys in self.client.processing().values() for key in keys}
        for future, submission_id in list(self.sent.items()):
            if future.key in taken or future.done():
                self.untaken.pop(future, None)
                continue
            self.untaken[future] += 1
            if self.untaken[future] >= 2 and _slots(_workers(self.client), self.name):
                del self.sent[future], self.untaken[future]
                future.cancel()
                if (graded := self.again_or_not(submission_id)) is not None:
                    self.on_graded(submission_id, graded)


def _workers(client: Client) -> dict[str, Any]:
    """The cluster's workers now, by address, as the scheduler describes them."""
    return client.scheduler_info(n_workers=-1).get("workers", {})


def _slots(workers: dict[str, Any], name: str) -> int:
    """How many submissions the cluster's `workers` can grade at once for this batch: the resource its slots offer,
    summed over the workers that have it now (a worker that joins later adds its own)."""
    return int(sum(worker.get("resources", {}).get(name, 0) for worker in workers.values()))


def _read(text: str) -> Graded:
    """A worker's answer, checked: anything but an outcome and a JSON object (or null) is the grader's failure."""
    data = json.loads(text)
    report = data["report"]
    if report is not None and not isinstance(report, dict):
        raise ValueError("the report is not a JSON object")
    return Graded(Outcome.from_json(data["outcome"]), report)
