-- A database made by `python -m app db migrate` at commit 4eb32de
-- (migrations applied, in this order: 0001, 0002, 0003, 0004, 0005, 0007, 0010, 0008); its schema and rows as sqlite3's iterdump writes them.
BEGIN TRANSACTION;
CREATE TABLE alert_states (
	rule TEXT NOT NULL, 
	target TEXT NOT NULL, 
	model TEXT NOT NULL, 
	state TEXT NOT NULL, 
	severity TEXT NOT NULL, 
	pending_since INTEGER, 
	firing_since INTEGER, 
	cleared_since INTEGER, 
	resolved_at INTEGER, 
	last_change_at INTEGER NOT NULL, 
	last_eval_at INTEGER NOT NULL, 
	value FLOAT, 
	threshold FLOAT, 
	summary TEXT, 
	recommendation TEXT, 
	labels TEXT, 
	PRIMARY KEY (rule, target, model)
);
CREATE TABLE alert_transitions (
	id INTEGER NOT NULL, 
	rule TEXT NOT NULL, 
	target TEXT NOT NULL, 
	model TEXT NOT NULL, 
	from_state TEXT NOT NULL, 
	to_state TEXT NOT NULL, 
	at INTEGER NOT NULL, 
	value FLOAT, 
	threshold FLOAT, 
	severity TEXT NOT NULL, 
	summary TEXT, 
	recommendation TEXT, 
	labels TEXT, 
	PRIMARY KEY (id)
);
CREATE TABLE bucket_layouts (
	id INTEGER NOT NULL, 
	bounds TEXT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (bounds)
);
CREATE TABLE gpu_rollups (
	gpu_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	samples INTEGER NOT NULL, 
	memory_used_bytes_sum FLOAT, 
	memory_total_bytes_sum FLOAT, 
	memory_busy_pct_sum FLOAT, 
	dram_bw_util_pct_sum FLOAT, 
	power_w_sum FLOAT, 
	temperature_c_sum FLOAT, 
	temperature_c_max FLOAT, 
	PRIMARY KEY (gpu_id, step, ts)
)
 WITHOUT ROWID

;
CREATE TABLE gpu_samples (
	target_id INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	gpu_id INTEGER NOT NULL, 
	memory_used_bytes FLOAT, 
	memory_total_bytes FLOAT, 
	memory_busy_pct FLOAT, 
	dram_bw_util_pct FLOAT, 
	power_w FLOAT, 
	temperature_c FLOAT, 
	PRIMARY KEY (target_id, ts, gpu_id)
)
 WITHOUT ROWID

;
CREATE TABLE gpus (
	id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	uuid TEXT NOT NULL, 
	gpu_index INTEGER, 
	name TEXT, 
	host TEXT, 
	peak_bw_gbps FLOAT, 
	peak_bw_source TEXT, 
	dram_bw_source TEXT, 
	last_seen INTEGER, 
	PRIMARY KEY (id), 
	UNIQUE (target_id, uuid), 
	FOREIGN KEY(target_id) REFERENCES targets (id)
);
CREATE TABLE leases (
	name TEXT NOT NULL, 
	holder TEXT NOT NULL, 
	acquired_at INTEGER NOT NULL, 
	expires_at INTEGER NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE model_rollups (
	model_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	samples INTEGER NOT NULL, 
	requests_running_sum FLOAT, 
	requests_running_max FLOAT, 
	requests_waiting_sum FLOAT, 
	requests_waiting_max FLOAT, 
	requests_swapped_sum FLOAT, 
	requests_swapped_max FLOAT, 
	kv_cache_usage_sum FLOAT, 
	kv_cache_usage_max FLOAT, 
	generation_tokens FLOAT, 
	prompt_tokens FLOAT, 
	preemptions FLOAT, 
	request_success FLOAT, 
	prefix_cache_hits FLOAT, 
	prefix_cache_queries FLOAT, 
	ttft_layout INTEGER, 
	ttft_count FLOAT, 
	ttft_sum FLOAT, 
	ttft_buckets BLOB, 
	itl_layout INTEGER, 
	itl_count FLOAT, 
	itl_sum FLOAT, 
	itl_buckets BLOB, 
	e2e_layout INTEGER, 
	e2e_count FLOAT, 
	e2e_sum FLOAT, 
	e2e_buckets BLOB, 
	queue_time_layout INTEGER, 
	queue_time_count FLOAT, 
	queue_time_sum FLOAT, 
	queue_time_buckets BLOB, 
	covered_ms INTEGER, 
	ttft_p95_s FLOAT, 
	PRIMARY KEY (model_id, step, ts)
)
 WITHOUT ROWID

;
CREATE TABLE models (
	id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	name TEXT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (target_id, name), 
	FOREIGN KEY(target_id) REFERENCES targets (id)
);
CREATE TABLE notification_attempts (
	id INTEGER NOT NULL, 
	notification_id INTEGER NOT NULL, 
	at INTEGER NOT NULL, 
	ok INTEGER NOT NULL, 
	answer TEXT NOT NULL, 
	PRIMARY KEY (id), 
	FOREIGN KEY(notification_id) REFERENCES notifications (id)
);
CREATE TABLE notification_groups (
	group_key TEXT NOT NULL, 
	recipients TEXT NOT NULL, 
	firing TEXT NOT NULL, 
	held TEXT NOT NULL, 
	last_notified_at INTEGER, 
	last_notification_id INTEGER, 
	PRIMARY KEY (group_key)
);
CREATE TABLE notifications (
	id INTEGER NOT NULL, 
	group_key TEXT NOT NULL, 
	kind TEXT NOT NULL, 
	status TEXT NOT NULL, 
	recipients TEXT NOT NULL, 
	subject TEXT NOT NULL, 
	body_text TEXT NOT NULL, 
	body_html TEXT NOT NULL, 
	images TEXT NOT NULL, 
	alerts TEXT NOT NULL, 
	created_at INTEGER NOT NULL, 
	due_at INTEGER NOT NULL, 
	attempts INTEGER NOT NULL, 
	last_error TEXT, 
	sent_at INTEGER, 
	answer TEXT, 
	PRIMARY KEY (id)
);
CREATE TABLE rollup_marks (
	step INTEGER NOT NULL, 
	until_ts INTEGER NOT NULL, 
	PRIMARY KEY (step)
);
CREATE TABLE samples (
	model_id INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	requests_running FLOAT, 
	requests_waiting FLOAT, 
	requests_swapped FLOAT, 
	kv_cache_usage FLOAT, 
	generation_tokens FLOAT, 
	prompt_tokens FLOAT, 
	preemptions FLOAT, 
	request_success FLOAT, 
	prefix_cache_hits FLOAT, 
	prefix_cache_queries FLOAT, 
	ttft_layout INTEGER, 
	ttft_count FLOAT, 
	ttft_sum FLOAT, 
	ttft_buckets BLOB, 
	itl_layout INTEGER, 
	itl_count FLOAT, 
	itl_sum FLOAT, 
	itl_buckets BLOB, 
	e2e_layout INTEGER, 
	e2e_count FLOAT, 
	e2e_sum FLOAT, 
	e2e_buckets BLOB, 
	queue_time_layout INTEGER, 
	queue_time_count FLOAT, 
	queue_time_sum FLOAT, 
	queue_time_buckets BLOB, 
	covered_ms INTEGER, 
	PRIMARY KEY (model_id, ts)
)
 WITHOUT ROWID

;
CREATE TABLE saved_queries (
	name TEXT NOT NULL, 
	sql TEXT NOT NULL, 
	description TEXT NOT NULL, 
	saved_at INTEGER NOT NULL, 
	PRIMARY KEY (name)
);
CREATE TABLE scrapes (
	target_id INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	up SMALLINT NOT NULL, 
	error TEXT, 
	duration_ms INTEGER, 
	queue_depth FLOAT, 
	gateway_error TEXT, 
	gpu_error TEXT, 
	PRIMARY KEY (target_id, ts)
)
 WITHOUT ROWID

;
CREATE TABLE series_state (
	model_id INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	state TEXT NOT NULL, 
	PRIMARY KEY (model_id)
);
CREATE TABLE silences (
	id INTEGER NOT NULL, 
	matchers TEXT NOT NULL, 
	starts_at INTEGER NOT NULL, 
	ends_at INTEGER NOT NULL, 
	author TEXT NOT NULL, 
	comment TEXT NOT NULL, 
	created_at INTEGER NOT NULL, 
	expired_at INTEGER, 
	PRIMARY KEY (id)
);
CREATE TABLE sweep_levels (
	run_id INTEGER NOT NULL, 
	position INTEGER NOT NULL, 
	concurrency INTEGER NOT NULL, 
	duration_s FLOAT NOT NULL, 
	requests INTEGER NOT NULL, 
	errors INTEGER NOT NULL, 
	tokens_per_s FLOAT, 
	qps FLOAT, 
	ttft_p50_s FLOAT, 
	ttft_p95_s FLOAT, 
	ttft_p99_s FLOAT, 
	itl_p95_s FLOAT, 
	e2e_mean_s FLOAT, 
	e2e_p95_s FLOAT, 
	error_rate FLOAT, 
	PRIMARY KEY (run_id, position), 
	FOREIGN KEY(run_id) REFERENCES sweep_runs (id)
);
CREATE TABLE sweep_runs (
	id INTEGER NOT NULL, 
	started_at FLOAT NOT NULL, 
	url TEXT NOT NULL, 
	model TEXT NOT NULL, 
	mix TEXT NOT NULL, 
	ttft_slo_s FLOAT NOT NULL, 
	recommendation TEXT NOT NULL, 
	target TEXT, 
	PRIMARY KEY (id)
);
CREATE TABLE sweetspot_migrations (
	name VARCHAR(200) NOT NULL, 
	applied_at INTEGER, 
	PRIMARY KEY (name)
);
INSERT INTO "sweetspot_migrations" VALUES('0001_initial_schema',0);
INSERT INTO "sweetspot_migrations" VALUES('0002_chart_covering_indexes',0);
INSERT INTO "sweetspot_migrations" VALUES('0003_gpu_samples_round_key',0);
INSERT INTO "sweetspot_migrations" VALUES('0004_covered_time',0);
INSERT INTO "sweetspot_migrations" VALUES('0005_alerts',0);
INSERT INTO "sweetspot_migrations" VALUES('0007_notifications',0);
INSERT INTO "sweetspot_migrations" VALUES('0010_sweep_target',0);
INSERT INTO "sweetspot_migrations" VALUES('0008_query_views',0);
CREATE TABLE sweetspot_thresholds (
	target TEXT NOT NULL, 
	ttft_p95_slo_s FLOAT NOT NULL, 
	concurrency FLOAT NOT NULL, 
	kv_warning FLOAT NOT NULL, 
	kv_critical FLOAT NOT NULL, 
	min_efficiency FLOAT NOT NULL, 
	queue_growth_s FLOAT NOT NULL, 
	updated_at INTEGER NOT NULL, 
	PRIMARY KEY (target)
);
INSERT INTO "sweetspot_thresholds" VALUES('*',3.0,16.0,0.9,0.98,0.6,180.0,0);
CREATE TABLE target_rollups (
	target_id INTEGER NOT NULL, 
	step INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	scrapes INTEGER NOT NULL, 
	up_scrapes INTEGER NOT NULL, 
	queue_samples INTEGER NOT NULL, 
	queue_depth_sum FLOAT, 
	queue_depth_max FLOAT, 
	PRIMARY KEY (target_id, step, ts)
)
 WITHOUT ROWID

;
CREATE TABLE targets (
	id INTEGER NOT NULL, 
	name TEXT NOT NULL, 
	vllm_url TEXT NOT NULL, 
	gateway_source TEXT NOT NULL, 
	gpu_source TEXT NOT NULL, 
	weight_gb FLOAT, 
	tensor_parallel INTEGER, 
	bandwidth_gbps FLOAT, 
	metric_names_used TEXT, 
	missing_metrics TEXT, 
	cache_config TEXT, 
	updated_at INTEGER, 
	PRIMARY KEY (id), 
	UNIQUE (name)
);
CREATE INDEX ix_model_rollups_ttft ON model_rollups (model_id, step, ts, samples, ttft_layout, ttft_buckets);
CREATE INDEX ix_model_rollups_tokens ON model_rollups (model_id, step, ts, samples, generation_tokens, covered_ms);
CREATE INDEX ix_alert_transitions_at ON alert_transitions (at);
CREATE INDEX ix_notifications_status ON notifications (status, due_at);
CREATE INDEX ix_notifications_created ON notifications (created_at);
CREATE VIEW target_info AS SELECT t.name AS target, t.vllm_url, t.gateway_source, t.gpu_source,
 (SELECT COUNT(*) FROM models m WHERE m.target_id = t.id) AS models,
 (SELECT COUNT(*) FROM gpus g WHERE g.target_id = t.id) AS gpus,
 t.weight_gb, t.tensor_parallel,
 COALESCE(t.bandwidth_gbps, (SELECT MIN(g.peak_bw_gbps) FROM gpus g WHERE g.target_id = t.id AND g.peak_bw_gbps IS NOT NULL AND g.peak_bw_source = 'nvml-formula'), 900.0) AS bandwidth_gbps,
 CASE WHEN t.weight_gb > 0 AND t.tensor_parallel > 0 THEN COALESCE(t.bandwidth_gbps, (SELECT MIN(g.peak_bw_gbps) FROM gpus g WHERE g.target_id = t.id AND g.peak_bw_gbps IS NOT NULL AND g.peak_bw_source = 'nvml-formula'), 900.0) / (t.weight_gb / t.tensor_parallel) END AS ceiling_tokens_per_s,
 th.ttft_p95_slo_s, th.concurrency, th.kv_warning, th.min_efficiency,
 th.updated_at AS thresholds_updated_at, iso_time(th.updated_at) AS thresholds_updated_time
FROM targets t LEFT JOIN sweetspot_thresholds th ON th.target = COALESCE((SELECT x.target FROM sweetspot_thresholds x WHERE x.target = t.name), '*');
CREATE VIEW minutes AS SELECT f.target, f.model, f.ts, f.time, f.samples, f.covered_s, f.tokens_per_s, f.prompt_tokens_per_s, f.requests_finished, f.requests_per_s, f.preemptions, f.running_avg, f.running_max, f.waiting_avg, f.waiting_max, f.queue_depth_max, f.kv_cache_usage_max, f.ttft_p50_s, f.ttft_p95_s, f.ttft_p99_s, f.itl_p50_s, f.itl_p95_s, f.itl_p99_s, f.e2e_p50_s, f.e2e_p95_s, f.e2e_p99_s, f.gpu_memory_used_gb, f.dram_bw_gbps, f.dram_bw_pct, f.ceiling_tokens_per_s, f.efficiency, CASE WHEN f.th_target IS NULL OR (f.tokens_per_s IS NULL AND f.running_max IS NULL) THEN NULL WHEN f.ttft_p95_s > f.th_ttft OR f.preemptions > 0 OR COALESCE(f.running_avg, f.running_max) > f.th_concurrency OR f.kv_cache_usage_max >= f.th_kv OR (f.queued > 0 AND f.running_max = 0 AND f.tokens_per_s = 0) OR (f.tokens_per_s IS NOT NULL AND f.ceiling_tokens_per_s > 0 AND f.queued > 0 AND NOT COALESCE((f.queued > 0 AND f.running_max = 0 AND f.tokens_per_s = 0), FALSE) AND f.tokens_per_s < f.th_efficiency * f.ceiling_tokens_per_s) THEN 0 ELSE 1 END AS in_sweet_spot, f.ttft_bounds, f.ttft_buckets, f.itl_bounds, f.itl_buckets, f.e2e_bounds, f.e2e_buckets
FROM (SELECT b.target, b.model, b.ts, iso_time(b.ts) AS time, b.samples, b.covered_s,
 b.generation_tokens / b.covered_s AS tokens_per_s, b.prompt_tokens / b.covered_s AS prompt_tokens_per_s,
 b.request_success AS requests_finished, b.request_success / b.covered_s AS requests_per_s,
 b.preemptions, b.running_avg, b.running_max, b.waiting_avg, b.waiting_max, b.queue_depth_max,
 b.kv_cache_usage_max,
 bucket_quantile(0.5, b.ttft_bounds, b.ttft_buckets) AS ttft_p50_s,
 b.ttft_p95_s,
 bucket_quantile(0.99, b.ttft_bounds, b.ttft_buckets) AS ttft_p99_s,
 bucket_quantile(0.5, b.itl_bounds, b.itl_buckets) AS itl_p50_s,
 bucket_quantile(0.95, b.itl_bounds, b.itl_buckets) AS itl_p95_s,
 bucket_quantile(0.99, b.itl_bounds, b.itl_buckets) AS itl_p99_s,
 bucket_quantile(0.5, b.e2e_bounds, b.e2e_buckets) AS e2e_p50_s,
 bucket_quantile(0.95, b.e2e_bounds, b.e2e_buckets) AS e2e_p95_s,
 bucket_quantile(0.99, b.e2e_bounds, b.e2e_buckets) AS e2e_p99_s,
 b.gpu_memory_used_gb, b.dram_bw_gbps, b.dram_bw_pct, b.ceiling_tokens_per_s,
 b.generation_tokens / b.covered_s / b.ceiling_tokens_per_s AS efficiency,
 b.th_target, b.th_ttft, b.th_concurrency, b.th_kv, b.th_efficiency,
 CASE WHEN COALESCE(b.waiting_max, 0) > COALESCE(b.queue_depth_max, 0) THEN COALESCE(b.waiting_max, 0)
   ELSE COALESCE(b.queue_depth_max, 0) END AS queued,
 b.ttft_bounds, b.ttft_buckets, b.itl_bounds, b.itl_buckets, b.e2e_bounds, b.e2e_buckets
FROM (SELECT tx.name AS target, m.name AS model, r.ts, r.samples,
 COALESCE(CAST(NULLIF(CASE WHEN tx.models = 1 THEN r.covered_ms ELSE (SELECT SUM(c.covered_ms) FROM model_rollups c WHERE c.step = r.step AND c.ts = r.ts AND c.model_id IN (SELECT cm.id FROM models cm WHERE cm.target_id = m.target_id)) END, 0) AS DOUBLE PRECISION) / 1000, 60) AS covered_s,
 r.generation_tokens, r.prompt_tokens, r.request_success, r.preemptions,
 CAST(r.requests_running_sum AS DOUBLE PRECISION) / r.samples AS running_avg, r.requests_running_max AS running_max,
 CAST(r.requests_waiting_sum AS DOUBLE PRECISION) / r.samples AS waiting_avg, r.requests_waiting_max AS waiting_max,
 tr.queue_depth_max, r.kv_cache_usage_max,
 (SELECT SUM(gr.memory_used_bytes_sum / gr.samples) / 1000000000 FROM gpu_rollups gr JOIN gpus g ON g.id = gr.gpu_id WHERE g.target_id = m.target_id AND gr.step = 60 AND gr.ts = r.ts) AS gpu_memory_used_gb,
 (SELECT SUM(gr.dram_bw_util_pct_sum / gr.samples / 100 * g.peak_bw_gbps) FROM gpu_rollups gr JOIN gpus g ON g.id = gr.gpu_id WHERE g.target_id = m.target_id AND gr.step = 60 AND gr.ts = r.ts) AS dram_bw_gbps,
 (SELECT AVG(gr.dram_bw_util_pct_sum / gr.samples) FROM gpu_rollups gr JOIN gpus g ON g.id = gr.gpu_id WHERE g.target_id = m.target_id AND gr.step = 60 AND gr.ts = r.ts) AS dram_bw_pct,
 r.ttft_p95_s, tx.ceiling AS ceiling_tokens_per_s, tx.th_target, tx.th_ttft, tx.th_concurrency, tx.th_kv, tx.th_efficiency,
 l_ttft.bounds AS ttft_bounds, r.ttft_buckets,
 l_itl.bounds AS itl_bounds, r.itl_buckets,
 l_e2e.bounds AS e2e_bounds, r.e2e_buckets
FROM model_rollups r JOIN models m ON m.id = r.model_id JOIN (SELECT t.id, t.name, CASE WHEN t.weight_gb > 0 AND t.tensor_parallel > 0 THEN COALESCE(t.bandwidth_gbps, (SELECT MIN(g.peak_bw_gbps) FROM gpus g WHERE g.target_id = t.id AND g.peak_bw_gbps IS NOT NULL AND g.peak_bw_source = 'nvml-formula'), 900.0) / (t.weight_gb / t.tensor_parallel) END AS ceiling,
 (SELECT COUNT(*) FROM models cm WHERE cm.target_id = t.id) AS models,
 th.target AS th_target, th.ttft_p95_slo_s AS th_ttft, th.concurrency AS th_concurrency,
 th.kv_warning AS th_kv, th.min_efficiency AS th_efficiency
FROM targets t LEFT JOIN sweetspot_thresholds th ON th.target = COALESCE((SELECT x.target FROM sweetspot_thresholds x WHERE x.target = t.name), '*') GROUP BY t.id, th.target) tx ON tx.id = m.target_id
LEFT JOIN target_rollups tr ON tr.target_id = m.target_id AND tr.step = r.step AND tr.ts = r.ts
LEFT JOIN bucket_layouts l_ttft ON l_ttft.id = r.ttft_layout
LEFT JOIN bucket_layouts l_itl ON l_itl.id = r.itl_layout
LEFT JOIN bucket_layouts l_e2e ON l_e2e.id = r.e2e_layout
WHERE r.step = 60) b) f;
CREATE VIEW hours AS SELECT f.target, f.model, f.ts, f.time, f.samples, f.covered_s, f.tokens_per_s, f.prompt_tokens_per_s, f.requests_finished, f.requests_per_s, f.preemptions, f.running_avg, f.running_max, f.waiting_avg, f.waiting_max, f.queue_depth_max, f.kv_cache_usage_max, f.ttft_p50_s, f.ttft_p95_s, f.ttft_p99_s, f.itl_p50_s, f.itl_p95_s, f.itl_p99_s, f.e2e_p50_s, f.e2e_p95_s, f.e2e_p99_s, f.gpu_memory_used_gb, f.dram_bw_gbps, f.dram_bw_pct, f.ceiling_tokens_per_s, f.efficiency, CASE WHEN f.th_target IS NULL OR (f.tokens_per_s IS NULL AND f.running_max IS NULL) THEN NULL WHEN f.ttft_p95_s > f.th_ttft OR f.preemptions > 0 OR COALESCE(f.running_avg, f.running_max) > f.th_concurrency OR f.kv_cache_usage_max >= f.th_kv OR (f.queued > 0 AND f.running_max = 0 AND f.tokens_per_s = 0) OR (f.tokens_per_s IS NOT NULL AND f.ceiling_tokens_per_s > 0 AND f.queued > 0 AND NOT COALESCE((f.queued > 0 AND f.running_max = 0 AND f.tokens_per_s = 0), FALSE) AND f.tokens_per_s < f.th_efficiency * f.ceiling_tokens_per_s) THEN 0 ELSE 1 END AS in_sweet_spot, f.ttft_bounds, f.ttft_buckets, f.itl_bounds, f.itl_buckets, f.e2e_bounds, f.e2e_buckets
FROM (SELECT b.target, b.model, b.ts, iso_time(b.ts) AS time, b.samples, b.covered_s,
 b.generation_tokens / b.covered_s AS tokens_per_s, b.prompt_tokens / b.covered_s AS prompt_tokens_per_s,
 b.request_success AS requests_finished, b.request_success / b.covered_s AS requests_per_s,
 b.preemptions, b.running_avg, b.running_max, b.waiting_avg, b.waiting_max, b.queue_depth_max,
 b.kv_cache_usage_max,
 bucket_quantile(0.5, b.ttft_bounds, b.ttft_buckets) AS ttft_p50_s,
 b.ttft_p95_s,
 bucket_quantile(0.99, b.ttft_bounds, b.ttft_buckets) AS ttft_p99_s,
 bucket_quantile(0.5, b.itl_bounds, b.itl_buckets) AS itl_p50_s,
 bucket_quantile(0.95, b.itl_bounds, b.itl_buckets) AS itl_p95_s,
 bucket_quantile(0.99, b.itl_bounds, b.itl_buckets) AS itl_p99_s,
 bucket_quantile(0.5, b.e2e_bounds, b.e2e_buckets) AS e2e_p50_s,
 bucket_quantile(0.95, b.e2e_bounds, b.e2e_buckets) AS e2e_p95_s,
 bucket_quantile(0.99, b.e2e_bounds, b.e2e_buckets) AS e2e_p99_s,
 b.gpu_memory_used_gb, b.dram_bw_gbps, b.dram_bw_pct, b.ceiling_tokens_per_s,
 b.generation_tokens / b.covered_s / b.ceiling_tokens_per_s AS efficiency,
 b.th_target, b.th_ttft, b.th_concurrency, b.th_kv, b.th_efficiency,
 CASE WHEN COALESCE(b.waiting_max, 0) > COALESCE(b.queue_depth_max, 0) THEN COALESCE(b.waiting_max, 0)
   ELSE COALESCE(b.queue_depth_max, 0) END AS queued,
 b.ttft_bounds, b.ttft_buckets, b.itl_bounds, b.itl_buckets, b.e2e_bounds, b.e2e_buckets
FROM (SELECT tx.name AS target, m.name AS model, r.ts, r.samples,
 COALESCE(CAST(NULLIF(CASE WHEN tx.models = 1 THEN r.covered_ms ELSE (SELECT SUM(c.covered_ms) FROM model_rollups c WHERE c.step = r.step AND c.ts = r.ts AND c.model_id IN (SELECT cm.id FROM models cm WHERE cm.target_id = m.target_id)) END, 0) AS DOUBLE PRECISION) / 1000, 3600) AS covered_s,
 r.generation_tokens, r.prompt_tokens, r.request_success, r.preemptions,
 CAST(r.requests_running_sum AS DOUBLE PRECISION) / r.samples AS running_avg, r.requests_running_max AS running_max,
 CAST(r.requests_waiting_sum AS DOUBLE PRECISION) / r.samples AS waiting_avg, r.requests_waiting_max AS waiting_max,
 tr.queue_depth_max, r.kv_cache_usage_max,
 (SELECT SUM(gr.memory_used_bytes_sum / gr.samples) / 1000000000 FROM gpu_rollups gr JOIN gpus g ON g.id = gr.gpu_id WHERE g.target_id = m.target_id AND gr.step = 3600 AND gr.ts = r.ts) AS gpu_memory_used_gb,
 (SELECT SUM(gr.dram_bw_util_pct_sum / gr.samples / 100 * g.peak_bw_gbps) FROM gpu_rollups gr JOIN gpus g ON g.id = gr.gpu_id WHERE g.target_id = m.target_id AND gr.step = 3600 AND gr.ts = r.ts) AS dram_bw_gbps,
 (SELECT AVG(gr.dram_bw_util_pct_sum / gr.samples) FROM gpu_rollups gr JOIN gpus g ON g.id = gr.gpu_id WHERE g.target_id = m.target_id AND gr.step = 3600 AND gr.ts = r.ts) AS dram_bw_pct,
 r.ttft_p95_s, tx.ceiling AS ceiling_tokens_per_s, tx.th_target, tx.th_ttft, tx.th_concurrency, tx.th_kv, tx.th_efficiency,
 l_ttft.bounds AS ttft_bounds, r.ttft_buckets,
 l_itl.bounds AS itl_bounds, r.itl_buckets,
 l_e2e.bounds AS e2e_bounds, r.e2e_buckets
FROM model_rollups r JOIN models m ON m.id = r.model_id JOIN (SELECT t.id, t.name, CASE WHEN t.weight_gb > 0 AND t.tensor_parallel > 0 THEN COALESCE(t.bandwidth_gbps, (SELECT MIN(g.peak_bw_gbps) FROM gpus g WHERE g.target_id = t.id AND g.peak_bw_gbps IS NOT NULL AND g.peak_bw_source = 'nvml-formula'), 900.0) / (t.weight_gb / t.tensor_parallel) END AS ceiling,
 (SELECT COUNT(*) FROM models cm WHERE cm.target_id = t.id) AS models,
 th.target AS th_target, th.ttft_p95_slo_s AS th_ttft, th.concurrency AS th_concurrency,
 th.kv_warning AS th_kv, th.min_efficiency AS th_efficiency
FROM targets t LEFT JOIN sweetspot_thresholds th ON th.target = COALESCE((SELECT x.target FROM sweetspot_thresholds x WHERE x.target = t.name), '*') GROUP BY t.id, th.target) tx ON tx.id = m.target_id
LEFT JOIN target_rollups tr ON tr.target_id = m.target_id AND tr.step = r.step AND tr.ts = r.ts
LEFT JOIN bucket_layouts l_ttft ON l_ttft.id = r.ttft_layout
LEFT JOIN bucket_layouts l_itl ON l_itl.id = r.itl_layout
LEFT JOIN bucket_layouts l_e2e ON l_e2e.id = r.e2e_layout
WHERE r.step = 3600) b) f;
CREATE VIEW gpu_minutes AS SELECT t.name AS target, g.uuid AS gpu_uuid, g.gpu_index, g.name AS gpu_name, g.host, r.ts,
 iso_time(r.ts) AS time, r.samples,
 CAST(r.memory_used_bytes_sum AS DOUBLE PRECISION) / r.samples / 1000000000 AS memory_used_gb, CAST(r.memory_total_bytes_sum AS DOUBLE PRECISION) / r.samples / 1000000000 AS memory_total_gb,
 CAST(r.memory_busy_pct_sum AS DOUBLE PRECISION) / r.samples AS memory_busy_pct, CAST(r.dram_bw_util_pct_sum AS DOUBLE PRECISION) / r.samples AS dram_bw_pct,
 CAST(r.dram_bw_util_pct_sum AS DOUBLE PRECISION) / r.samples / 100 * g.peak_bw_gbps AS dram_bw_gbps, g.peak_bw_gbps,
 CAST(r.power_w_sum AS DOUBLE PRECISION) / r.samples AS power_w, CAST(r.temperature_c_sum AS DOUBLE PRECISION) / r.samples AS temperature_c, r.temperature_c_max
FROM gpu_rollups r JOIN gpus g ON g.id = r.gpu_id JOIN targets t ON t.id = g.target_id WHERE r.step = 60;
CREATE VIEW gpu_hours AS SELECT t.name AS target, g.uuid AS gpu_uuid, g.gpu_index, g.name AS gpu_name, g.host, r.ts,
 iso_time(r.ts) AS time, r.samples,
 CAST(r.memory_used_bytes_sum AS DOUBLE PRECISION) / r.samples / 1000000000 AS memory_used_gb, CAST(r.memory_total_bytes_sum AS DOUBLE PRECISION) / r.samples / 1000000000 AS memory_total_gb,
 CAST(r.memory_busy_pct_sum AS DOUBLE PRECISION) / r.samples AS memory_busy_pct, CAST(r.dram_bw_util_pct_sum AS DOUBLE PRECISION) / r.samples AS dram_bw_pct,
 CAST(r.dram_bw_util_pct_sum AS DOUBLE PRECISION) / r.samples / 100 * g.peak_bw_gbps AS dram_bw_gbps, g.peak_bw_gbps,
 CAST(r.power_w_sum AS DOUBLE PRECISION) / r.samples AS power_w, CAST(r.temperature_c_sum AS DOUBLE PRECISION) / r.samples AS temperature_c, r.temperature_c_max
FROM gpu_rollups r JOIN gpus g ON g.id = r.gpu_id JOIN targets t ON t.id = g.target_id WHERE r.step = 3600;
CREATE VIEW alert_history AS SELECT id, rule, target, model, from_state, to_state, at AS changed_at, iso_time(at) AS changed_time, value, threshold, severity, summary, recommendation, labels FROM alert_transitions;
CREATE VIEW silence_list AS SELECT id, matchers, starts_at, iso_time(starts_at) AS starts_time, ends_at, iso_time(ends_at) AS ends_time, author, comment, created_at, iso_time(created_at) AS created_time, expired_at, iso_time(expired_at) AS expired_time FROM silences;
CREATE VIEW notification_list AS SELECT id, group_key, kind, status, recipients, subject, created_at, iso_time(created_at) AS created_time, due_at, iso_time(due_at) AS due_time, attempts, last_error, sent_at, iso_time(sent_at) AS sent_time FROM notifications;
CREATE VIEW sweeps AS SELECT id AS run_id, started_at, iso_time(started_at) AS started_time, url, model, mix, ttft_slo_s, recommendation FROM sweep_runs;
CREATE VIEW sweep_results AS SELECT l.run_id, iso_time(s.started_at) AS started_time, s.model, l.position, l.concurrency, l.duration_s, l.requests, l.errors, l.tokens_per_s, l.qps, l.ttft_p50_s, l.ttft_p95_s, l.ttft_p99_s, l.itl_p95_s, l.e2e_mean_s, l.e2e_p95_s, l.error_rate FROM sweep_levels l JOIN sweep_runs s ON s.id = l.run_id;
COMMIT;
