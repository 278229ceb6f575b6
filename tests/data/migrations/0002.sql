-- A database made by `python -m app db migrate` at commit 7a5adc5
-- (migrations applied, in this order: 0001, 0002); its schema and rows as sqlite3's iterdump writes them.
BEGIN TRANSACTION;
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
	gpu_id INTEGER NOT NULL, 
	ts INTEGER NOT NULL, 
	memory_used_bytes FLOAT, 
	memory_total_bytes FLOAT, 
	memory_busy_pct FLOAT, 
	dram_bw_util_pct FLOAT, 
	power_w FLOAT, 
	temperature_c FLOAT, 
	PRIMARY KEY (gpu_id, ts)
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
	PRIMARY KEY (model_id, ts)
)
 WITHOUT ROWID

;
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
	PRIMARY KEY (id)
);
CREATE TABLE sweetspot_migrations (
	name VARCHAR(200) NOT NULL, 
	applied_at INTEGER, 
	PRIMARY KEY (name)
);
INSERT INTO "sweetspot_migrations" VALUES('0001_initial_schema',0);
INSERT INTO "sweetspot_migrations" VALUES('0002_chart_covering_indexes',0);
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
CREATE INDEX ix_model_rollups_tokens ON model_rollups (model_id, step, ts, samples, generation_tokens);
COMMIT;
