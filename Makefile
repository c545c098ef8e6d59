# rollout_fdw — PGXS build.
#
#   make && make install          build and install into the PostgreSQL found by PG_CONFIG
#   make installcheck             pg_regress (sql/, expected/) then the TAP tests (test/t/)
#
# The tree mirrors the layering of docs/ARCHITECTURE.md: every directory under
# src/ is one layer, and the lower layers (objstore, format) know nothing of the
# upper ones (lsm, read, fdw, sql).

MODULE_big = rollout_fdw

OBJS = \
	src/rollout_fdw.o \
	src/objstore/objstore.o \
	src/objstore/file_store.o \
	src/objstore/file_wal_log.o \
	src/objstore/http_session.o \
	src/objstore/s3_store.o \
	src/objstore/azure_store.o \
	src/objstore/read_cache.o \
	src/objstore/maintenance_cost.o \
	src/format/segment_writer.o \
	src/format/segment_reader.o \
	src/format/datum_codec.o \
	src/format/image_check.o \
	src/format/key_filter.o \
	src/format/row_blob.o \
	src/format/key_set.o \
	src/core/fault.o \
	src/core/json_doc.o \
	src/core/portable_values.o \
	src/core/scratch.o \
	src/core/subtransaction.o \
	src/core/grace.o \
	src/core/store_definition.o \
	src/core/store_catalog.o \
	src/core/store_keys.o \
	src/core/store_sources.o \
	src/core/footer_cache.o \
	src/core/shared_footer_cache.o \
	src/core/shard.o \
	src/core/manifest.o \
	src/core/manifest_view.o \
	src/core/manifest_cache.o \
	src/core/wal.o \
	src/core/write_proof.o \
	src/core/shared_store.o \
	src/core/memtable.o \
	src/core/store_stats.o \
	src/core/snapshot.o \
	src/core/snapshot_serial.o \
	src/core/store_snapshot.o \
	src/core/store_token.o \
	src/core/named_snapshot.o \
	src/read/key_range.o \
	src/read/key_split.o \
	src/read/row_source.o \
	src/read/prefetch.o \
	src/read/merge_iterator.o \
	src/read/row_filter.o \
	src/lsm/ingest.o \
	src/lsm/writer_epoch.o \
	src/lsm/group_commit.o \
	src/lsm/commit.o \
	src/lsm/rewrite.o \
	src/lsm/cluster_ranges.o \
	src/lsm/flush.o \
	src/lsm/merge.o \
	src/lsm/tombstone_horizon.o \
	src/lsm/compact.o \
	src/lsm/gc.o \
	src/lsm/observe.o \
	src/lsm/change_feed.o \
	src/fdw/handler.o \
	src/fdw/options.o \
	src/fdw/store_cache.o \
	src/fdw/analyze.o \
	src/fdw/import.o \
	src/fdw/server_location.o \
	src/fdw/scan_estimate.o \
	src/fdw/scan_plan.o \
	src/fdw/scan_filter.o \
	src/fdw/scan.o \
	src/fdw/scan_explain.o \
	src/fdw/scan_snapshot.o \
	src/fdw/scan_parallel.o \
	src/fdw/modify.o \
	src/fdw/xact_buffer.o \
	src/worker/shmem.o \
	src/worker/sweeper.o \
	src/sql/sql_common.o \
	src/sql/maintenance.o \
	src/sql/named_snapshots.o \
	src/sql/changes.o \
	src/sql/inspection.o \
	src/sql/store_list.o \
	src/sql/stat_view.o

EXTENSION = rollout_fdw
DATA = rollout_fdw--0.1.sql rollout_fdw--0.2.sql rollout_fdw--0.1--0.2.sql \
	rollout_fdw--0.2--0.3.sql rollout_fdw--0.3--0.4.sql \
	rollout_fdw--0.4--0.5.sql rollout_fdw--0.5--0.6.sql \
	rollout_fdw--0.6--0.7.sql rollout_fdw--0.7--0.8.sql \
	rollout_fdw--0.8--0.9.sql

REGRESS = $(notdir $(basename $(sort $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=. --outputdir=. --load-extension=rollout_fdw

TAP_TESTS = 1
PROVE_TESTS ?= test/t/*.pl

# -Wextra except -Wunused-parameter: FDW, GUC and transaction callbacks must
# accept arguments they do not need.
PG_CPPFLAGS = -I$(srcdir)/include -Wall -Wextra -Wno-unused-parameter
# zstd: column chunks; libcurl, OpenSSL and libxml2: the object-store backends
SHLIB_LINK = -lzstd -lcurl -lcrypto -lxml2

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: rebuild everything when a header changes,
# rather than link objects compiled against an old struct layout.
$(OBJS): $(wildcard $(srcdir)/include/rollout/*.h) $(wildcard $(srcdir)/src/*/*.h)
