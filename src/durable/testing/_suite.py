"""The whole Backend conformance suite: `check_backend` runs every check in `CHECKS`."""

from __future__ import annotations

from collections.abc import Callable

from . import _conformance_attributes as attributes
from . import _conformance_continuing as continuing
from . import _conformance_control as control
from . import _conformance_event_schemas as event_schemas
from . import _conformance_forks as forks
from . import _conformance_history as history
from . import _conformance_inspection as inspection
from . import _conformance_outbox as outbox
from . import _conformance_queues as queues
from . import _conformance_runs as runs
from . import _conformance_schedules as schedules
from . import _conformance_search as search
from . import _conformance_streams as streams
from . import _conformance_tallies as tallies
from . import _conformance_traces as traces
from . import _conformance_versions as versions
from . import _conformance_waits as waits
from ._conformance import MakeBackend

#: Every check, in the order check_backend runs them: the basics first, so that the
#: first contract a backend breaks is named first.
CHECKS: tuple[Callable[[MakeBackend], None], ...] = (
    runs.check_create_run_once,
    runs.check_create_run_returns_the_stored_parent,
    runs.check_create_queued_run,
    runs.check_get_run,
    runs.check_create_race,
    history.check_history_round_trip,
    history.check_record_first_writer_wins,
    history.check_record_retrying_then_finished,
    history.check_record_is_fenced,
    history.check_record_steps_is_one_write,
    history.check_finish_run_records_the_last_step,
    history.check_heartbeat_is_fenced_and_reports_cancel,
    history.check_hung_attempt_makes_its_run_claimable,
    history.check_claim_fences_old_owner,
    history.check_state_snapshots,
    runs.check_finish_run,
    runs.check_finish_failed,
    runs.check_run_deadline,
    runs.check_blocked_run_is_resumable,
    runs.check_claim_respects_live_lease,
    runs.check_claim_expired_lease,
    runs.check_mark_progress,
    runs.check_claim_queued_and_finished,
    runs.check_claim_race,
    runs.check_release_run,
    runs.check_claim_next_order_and_filters,
    runs.check_claim_next_priorities_at_the_int4_limits,
    runs.check_claim_next_race,
    runs.check_cancel_tree,
    continuing.check_continue_run_hands_over,
    continuing.check_continue_run_is_fenced_and_once,
    continuing.check_send_follows_the_chain,
    control.check_pause_and_resume_a_tree,
    control.check_pause_meets_resume_and_cancel,
    control.check_cancelling_lists_the_owners_runs_asked_to_cancel,
    control.check_resume_reopens_a_cancelled_run,
    forks.check_fork_run,
    waits.check_watch_wakes_waiters,
    runs.check_renew_leases,
    runs.check_recoverable,
    runs.check_now,
    waits.check_suspend_and_wake_due,
    waits.check_due_run_is_claimable_and_recoverable,
    waits.check_send_and_consume,
    waits.check_send_errors_and_keys,
    waits.check_events_wake_waiting_runs,
    waits.check_finishing_child_wakes_parent,
    waits.check_cancel_waiting_run,
    waits.check_no_lost_wake_ups,
    waits.check_wake_due_race,
    waits.check_suspend_decides_once,
    control.check_any_event_inbox,
    inspection.check_purge_old_finished_runs,
    inspection.check_purge_keeps_what_live_runs_need,
    inspection.check_purge_batches,
    inspection.check_purge_race,
    inspection.check_list_runs_newest_first_with_filters,
    search.check_id_search_is_a_case_sensitive_substring,
    inspection.check_outcomes_of_runs_and_tasks,
    inspection.check_retry_reopens_failed_steps_and_queues,
    inspection.check_retry_keeps_the_outcomes_it_erases,
    inspection.check_actions_log,
    schedules.check_schedule_round_trip,
    schedules.check_schedule_replace_and_delete,
    schedules.check_due_and_next_schedule,
    schedules.check_advance_schedule_compare_and_set,
    schedules.check_set_schedule_paused,
    schedules.check_advance_schedule_race,
    schedules.check_held_schedules_are_taken_by_one_worker,
    schedules.check_create_runs_makes_each_once,
    schedules.check_a_run_created_to_start_later_waits_until_then,
    queues.check_queue_round_trip,
    queues.check_concurrency_holds_across_racing_claimers,
    queues.check_a_lowered_limit_claims_nothing_until_below_it,
    queues.check_a_dead_workers_slot_frees_when_its_lease_expires,
    queues.check_key_limits,
    queues.check_key_limits_hold_across_racing_claimers,
    queues.check_rate_window,
    queues.check_key_rate_window,
    queues.check_debounce_coalesces_a_burst,
    versions.check_version_stamped_on_create_and_first_start,
    versions.check_only_version_claim_next,
    versions.check_only_version_claim_run,
    versions.check_only_version_limited_queue,
    versions.check_list_runs_by_version,
    outbox.check_create_run_in_refuses_what_is_no_transaction,
    attributes.check_attributes_filter_runs,
    attributes.check_record_attributes_with_its_step,
    attributes.check_attributes_follow_continue_fork_and_purge,
    traces.check_trace_context_round_trip,
    streams.check_stream_write_read_and_close,
    streams.check_stream_numbered_writes_are_stored_once,
    streams.check_stream_writes_are_fenced,
    streams.check_stream_writers_take_turns,
    streams.check_stream_write_wakes_watchers,
    streams.check_streams_are_purged_with_their_run,
    tallies.check_tallies_count_runs_and_calls,
    tallies.check_tallies_keep_an_erased_failure,
    event_schemas.check_event_schemas_round_trip,
)


def check_backend(make_backend: MakeBackend) -> None:
    """Run every Backend contract check against fresh backends from *make_backend*.

    *make_backend* must return a new, empty backend each time it is called.

    Raises:
        AssertionError: naming the contract the backend breaks.
    """
    for check in CHECKS:
        try:
            check(make_backend)
        except AssertionError as error:
            raise AssertionError(f"{check.__name__}: {check.__doc__} -- {error}") from error
