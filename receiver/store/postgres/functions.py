"""PostgreSQL functions the migrations create (``migrations``): each text here is a released
migration, never to be edited; a change is a new migration that replaces the function."""

from __future__ import annotations

# Migration 10: group commit of ingests (``group_commit``). One call runs a batch of events,
# each with exactly the statements of the one-event path (``ingest.ingest_one``: ``sql``'s
# text with each placeholder an array element, which tests/store/test_pg_batch.py checks; a
# change there needs a new migration replacing this function), in input order, answering one
# row per event in that order. The events come as parallel arrays, one element each; their
# handlers, ragged, as one flat array in event order with each event's count beside it (no
# separator that a handler's name could contain). The completion-order lock
# (sql.COMPLETION_ORDER_LOCK) is taken once, up front, when any event is terminal: before
# any row lock, so a stream reader queued for it exclusively never stands between two batches
# that wait for each other's rows.
INGEST_BATCH_FUNCTION = """
CREATE FUNCTION jobhook_ingest_batch(
    p_source text[], p_message_id text[], p_job_id text[], p_state text[],
    p_provider_status text[], p_metadata jsonb[], p_error text[], p_at double precision[],
    p_terminal_at double precision[], p_progress_done bigint[], p_progress_total bigint[],
    p_expected_pages bigint[], p_poll_at double precision[], p_error_code text[],
    p_phase text[], p_result_ref text[], p_traceparent text[], p_handler_count integer[],
    p_handlers text[]
) RETURNS TABLE (o_status text, o_state text, o_completed boolean,
                 o_took double precision, o_requeued integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_next_handler integer := 1;
    v_took double precision;
    v_completion bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_terminal_at) AS t WHERE t IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock_shared(7669456891120937730);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_source, 1), 0) LOOP
        o_status := 'accepted';
        o_completed := false;
        o_took := NULL;
        o_requeued := 0;
        IF p_message_id[i] IS NOT NULL THEN
            INSERT INTO deliveries (source, message_id, job_id, state, provider_status,
                                    received_at)
            VALUES (p_source[i], p_message_id[i], p_job_id[i], p_state[i],
                    p_provider_status[i], p_at[i]) ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                UPDATE dispatches SET state = 'pending', attempts = 0,
                    next_attempt_at = p_at[i], updated_at = p_at[i],
                    lease_owner = NULL, lease_until = NULL
                WHERE state = 'dead'
                  AND completion_id = (SELECT id FROM completions
                                       WHERE source = p_source[i] AND job_id = p_job_id[i]);
                GET DIAGNOSTICS o_requeued = ROW_COUNT;
                SELECT state INTO o_state FROM jobs
                WHERE source = p_source[i] AND job_id = p_job_id[i];
                o_status := 'duplicate';
            END IF;
        END IF;
        IF o_status = 'accepted' THEN
            INSERT INTO jobs (source, job_id, state, provider_status, metadata, error,
                              created_at, updated_at, last_news_at, terminal_at,
                              progress_done, progress_total, expected_pages, next_poll_at,
                              error_code)
            VALUES (p_source[i], p_job_id[i], p_state[i], p_provider_status[i],
                    p_metadata[i]::jsonb, p_error[i], p_at[i], p_at[i], p_at[i], p_terminal_at[i],
                    p_progress_done[i], p_progress_total[i], p_expected_pages[i],
                    p_poll_at[i], p_error_code[i])
            ON CONFLICT (source, job_id) DO UPDATE SET
                state = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.state ELSE jobs.state END,
                provider_status = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.provider_status ELSE jobs.provider_status END,
                error = CASE WHEN jobs.terminal_at IS NULL
                             THEN coalesce(excluded.error, jobs.error) ELSE jobs.error END,
                error_code = CASE WHEN jobs.terminal_at IS NULL
                                  THEN coalesce(excluded.error_code, jobs.error_code)
                                  ELSE jobs.error_code END,
                terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
                metadata = jobhook_merge_patch(jobs.metadata, excluded.metadata),
                updated_at = excluded.updated_at,
                last_news_at = excluded.last_news_at,
                progress_done = coalesce(excluded.progress_done, jobs.progress_done),
                progress_total = coalesce(excluded.progress_total, jobs.progress_total),
                expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
                next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
                poll_attempts = CASE WHEN excluded.next_poll_at IS NULL
                                     THEN jobs.poll_attempts ELSE 0 END
            RETURNING state, terminal_at - created_at INTO o_state, v_took;
            IF p_terminal_at[i] IS NOT NULL AND o_state = p_state[i] THEN
                INSERT INTO completions (source, job_id, state, provider_status, metadata,
                                         error, created_at, next_attempt_at, phase,
                                         result_ref, error_code, traceparent)
                SELECT source, job_id, state, provider_status, metadata, error,
                       p_at[i]::double precision, p_at[i]::double precision,
                       p_phase[i]::text, p_result_ref[i]::text, error_code,
                       p_traceparent[i]::text
                FROM jobs WHERE source = p_source[i] AND job_id = p_job_id[i]
                ON CONFLICT (source, job_id) DO NOTHING RETURNING id INTO v_completion;
                IF v_completion IS NOT NULL THEN
                    o_completed := true;
                    o_took := v_took;
                    FOR h IN v_next_handler .. v_next_handler + p_handler_count[i] - 1 LOOP
                        INSERT INTO dispatches (completion_id, handler, next_attempt_at,
                                                updated_at)
                        VALUES (v_completion, p_handlers[h], p_at[i], p_at[i])
                        ON CONFLICT DO NOTHING;
                    END LOOP;
                END IF;
            END IF;
        END IF;
        v_next_handler := v_next_handler + p_handler_count[i];
        RETURN NEXT;
    END LOOP;
END $$;
"""


# Migration 12: the same function keyed by jobhook's own id of each job (jobs.id): read
# first (or a fresh one from the job's sequence, for a job seen for the first time), it keys the
# delivery, the job's insert and its completion, like ``ingest.ingest_one``. A job first seen by
# two transactions at once keeps the id of the one that inserted it; the other moves its
# delivery to that id before it commits.
INGEST_BY_JOB_ID_FUNCTION = """
CREATE OR REPLACE FUNCTION jobhook_ingest_batch(
    p_source text[], p_message_id text[], p_job_id text[], p_state text[],
    p_provider_status text[], p_metadata jsonb[], p_error text[], p_at double precision[],
    p_terminal_at double precision[], p_progress_done bigint[], p_progress_total bigint[],
    p_expected_pages bigint[], p_poll_at double precision[], p_error_code text[],
    p_phase text[], p_result_ref text[], p_traceparent text[], p_handler_count integer[],
    p_handlers text[]
) RETURNS TABLE (o_status text, o_state text, o_completed boolean,
                 o_took double precision, o_requeued integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_next_handler integer := 1;
    v_took double precision;
    v_completion bigint;
    v_job bigint;
    v_stored bigint;
    v_known text;
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_terminal_at) AS t WHERE t IS NOT NULL) THEN
        PERFORM pg_advisory_xact_lock_shared(7669456891120937730);
    END IF;
    FOR i IN 1 .. coalesce(array_length(p_source, 1), 0) LOOP
        o_status := 'accepted';
        o_completed := false;
        o_took := NULL;
        o_requeued := 0;
        v_job := NULL;
        SELECT id, state INTO v_job, v_known FROM jobs
        WHERE source = p_source[i] AND job_id = p_job_id[i];
        IF v_job IS NULL THEN
            v_job := nextval('jobs_id_seq');
            v_known := p_state[i];
        END IF;
        IF p_message_id[i] IS NOT NULL THEN
            INSERT INTO deliveries (source, message_id, job_id, state, provider_status,
                                    received_at, job)
            VALUES (p_source[i], p_message_id[i], p_job_id[i], p_state[i],
                    p_provider_status[i], p_at[i], v_job) ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                UPDATE dispatches SET state = 'pending', attempts = 0,
                    next_attempt_at = p_at[i], updated_at = p_at[i],
                    lease_owner = NULL, lease_until = NULL
                WHERE state = 'dead'
                  AND completion_id = (SELECT id FROM completions WHERE job = v_job);
                GET DIAGNOSTICS o_requeued = ROW_COUNT;
                o_state := coalesce((SELECT state FROM jobs WHERE id = v_job), v_known);
                o_status := 'duplicate';
            END IF;
        END IF;
        IF o_status = 'accepted' THEN
            INSERT INTO jobs (source, job_id, state, provider_status, metadata, error,
                              created_at, updated_at, last_news_at, terminal_at,
                              progress_done, progress_total, expected_pages, next_poll_at,
                              error_code, id)
            VALUES (p_source[i], p_job_id[i], p_state[i], p_provider_status[i],
                    p_metadata[i]::jsonb, p_error[i], p_at[i], p_at[i], p_at[i], p_terminal_at[i],
                    p_progress_done[i], p_progress_total[i], p_expected_pages[i],
                    p_poll_at[i], p_error_code[i], v_job)
            ON CONFLICT (source, job_id) DO UPDATE SET
                state = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.state ELSE jobs.state END,
                provider_status = CASE WHEN jobs.terminal_at IS NULL
                    AND (CASE excluded.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                         ELSE 2 END)
                        >= (CASE jobs.state WHEN 'queued' THEN 0 WHEN 'running' THEN 1
                            ELSE 2 END)
                    THEN excluded.provider_status ELSE jobs.provider_status END,
                error = CASE WHEN jobs.terminal_at IS NULL
                             THEN coalesce(excluded.error, jobs.error) ELSE jobs.error END,
                error_code = CASE WHEN jobs.terminal_at IS NULL
                                  THEN coalesce(excluded.error_code, jobs.error_code)
                                  ELSE jobs.error_code END,
                terminal_at = coalesce(jobs.terminal_at, excluded.terminal_at),
                metadata = jobhook_merge_patch(jobs.metadata, excluded.metadata),
                updated_at = excluded.updated_at,
                last_news_at = excluded.last_news_at,
                progress_done = coalesce(excluded.progress_done, jobs.progress_done),
                progress_total = coalesce(excluded.progress_total, jobs.progress_total),
                expected_pages = coalesce(excluded.expected_pages, jobs.expected_pages),
                next_poll_at = coalesce(excluded.next_poll_at, jobs.next_poll_at),
                poll_attempts = CASE WHEN excluded.next_poll_at IS NULL
                                     THEN jobs.poll_attempts ELSE 0 END
            RETURNING id, state, terminal_at - created_at INTO v_stored, o_state, v_took;
            IF v_stored <> v_job AND p_message_id[i] IS NOT NULL THEN
                -- another transaction saw the job first, after our read: its id, not ours
                UPDATE deliveries SET job = v_stored
                WHERE source = p_source[i] AND message_id = p_message_id[i];
            END IF;
            IF p_terminal_at[i] IS NOT NULL AND o_state = p_state[i] THEN
                INSERT INTO completions (job, source, job_id, state, provider_status, metadata,
                                         error, created_at, next_attempt_at, phase,
                                         result_ref, error_code, traceparent)
                SELECT id, source, job_id, state, provider_status, metadata, error,
                       p_at[i]::double precision, p_at[i]::double precision,
                       p_phase[i]::text, p_result_ref[i]::text, error_code,
                       p_traceparent[i]::text
                FROM jobs WHERE id = v_stored
                ON CONFLICT (job) DO NOTHING RETURNING id INTO v_completion;
                IF v_completion IS NOT NULL THEN
                    o_completed := true;
                    o_took := v_took;
                    FOR h IN v_next_handler .. v_next_handler + p_handler_count[i] - 1 LOOP
                        INSERT INTO dispatches (completion_id, handler, next_attempt_at,
                                                updated_at)
                        VALUES (v_completion, p_handlers[h], p_at[i], p_at[i])
                        ON CONFLICT DO NOTHING;
                    END LOOP;
                END IF;
            END IF;
        END IF;
        v_next_handler := v_next_handler + p_handler_count[i];
        RETURN NEXT;
    END LOOP;
END $$;
"""
