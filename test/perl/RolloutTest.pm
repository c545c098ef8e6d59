
# Copyright (c) rollout_fdw authors
#
# RolloutTest.pm — helpers shared by the TAP tests in test/t.
#
# The suite runs in two modes (scripts/test.sh runs both):
#   plain    nothing preloaded: every committing transaction writes its own
#            WAL entry at the next position; scans read the WAL tail from the
#            store.
#   preload  ROLLOUT_TEST_PRELOAD=rollout_fdw puts the extension in
#            shared_preload_libraries: the shared-memory writer.  The first
#            commit after startup claims the shard (flushes the durable WAL
#            tail, commits a shard manifest with writer_epoch + 1, writes a
#            fence marker — a WAL entry without rows — at the next position);
#            later commits are group commits (one entry may carry several
#            transactions) and their rows are scanned from the memtable.
# Tests whose expectations differ between the modes by design ask preload()
# and state the expected value of each mode explicitly.
#
# Here also: nodes (mode_node for the suite's mode, writer_node for the
# shared-memory-writer tests, shard_of), what a test asks a node
# (store_stats, observe, still_running, poll_until, the log), psql
# helpers of the remote-backend tests, and the segment footer.  The store
# itself (objects, WAL, manifests) is RolloutStore.pm; sessions running in
# the background are PsqlScript.pm.
#
# Loaded with:  use FindBin; use lib "$FindBin::RealBin/../perl";

package RolloutTest;

use strict;
use warnings;

use Exporter 'import';
use JSON::PP;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils ();
use RolloutStore ();
use Time::HiRes ();

our @EXPORT_OK = qw(preload configure_node mode_node writer_node shard_of
  slurp_bin write_bin segment_metadata contiguous poll_until store_stats
  observe still_running wait_for_fault release_faults hold_faults count_in_log create_mapping try_sql
  restart_after_crash plan_node_types find_plan_node loop_size run_concurrently
  pump_if_running foreign_scan_of crc32c reseal_json set_min_gc_grace with_min_gc_grace);

# True when the suite runs with the shared-memory writer.
sub preload
{
	return (($ENV{ROLLOUT_TEST_PRELOAD} // '') =~ /\brollout_fdw\b/) ? 1 : 0;
}

# How many rounds a randomized or stress loop runs: loop_size(file => N,
# remote => M, long => L).  On S3 and Azure every round goes through an
# emulator that answers in milliseconds rather than microseconds, and the
# remote runs repeat the file:// runs' paths through another backend; they
# run M rounds, which still reach every branch of the loop, so that the
# whole matrix fits in CI.  The file:// runs take N.  ROLLOUT_TEST_LONG=1
# runs L (default N) on every backend.
sub loop_size
{
	my (%n) = @_;
	return $n{long} // $n{file} if $ENV{ROLLOUT_TEST_LONG};
	return RolloutStore::remote() ? $n{remote} : $n{file};
}

# postgresql.conf of a TAP node for the current mode.  With the extension
# preloaded its background sweeper would, by default, flush every 30 s and
# merge at 8 generations in database "postgres" — on its own schedule, which
# would make the positions, generations and versions these tests predict
# depend on timing.  The tests here are about the write and read protocols,
# so they switch the sweeper off (rollout_fdw.worker_databases = '').
sub configure_node
{
	my ($node) = @_;
	return unless $ENV{ROLLOUT_TEST_PRELOAD};
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = '$ENV{ROLLOUT_TEST_PRELOAD}'");
	$node->append_conf('postgresql.conf', "rollout_fdw.worker_databases = ''")
	  if preload();
	return;
}

# A started node for the suite's mode: a new PostgreSQL::Test::Cluster
# $name, init (with the options of $opts{init}, e.g. { allows_streaming => 1 }),
# configure_node, then the postgresql.conf text of each element of
# $opts{conf}, in order (a later setting wins over configure_node's).
sub mode_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%{ $opts{init} // {} });
	configure_node($node);
	$node->append_conf('postgresql.conf', $_) for @{ $opts{conf} // [] };
	$node->start;
	return $node;
}

# The settings of writer_node: the shared-memory writer, and its sweeper
# visiting database "postgres" but doing nothing on its own schedule (no
# timed flush, merge or gc) unless a test reloads one of these.
my @WRITER_SETTINGS = (
	shared_preload_libraries => 'rollout_fdw',
	'rollout_fdw.worker_databases' => 'postgres',
	'rollout_fdw.flush_interval' => 0,
	'rollout_fdw.merge_after_generations' => 0,
	'rollout_fdw.gc_interval' => 0);

# A started node of the shared-memory-writer tests (012-018), whatever the
# suite's mode: @WRITER_SETTINGS, then @settings (name => value pairs, in
# order) replacing or adding to them.  Whole numbers are written as they
# are, every other value quoted: writer_node('x', max_connections => 40,
# 'rollout_fdw.memtable_size' => '1MB').  A hash reference before the
# settings holds options of PostgreSQL::Test::Cluster's init:
# writer_node('x', { allows_streaming => 1 }).
sub writer_node
{
	my ($name, @settings) = @_;
	my %init = ref($settings[0]) eq 'HASH' ? %{ shift @settings } : ();
	my (@names, %value);
	my @pairs = (@WRITER_SETTINGS, @settings);
	while (my ($setting, $value) = splice(@pairs, 0, 2))
	{
		push @names, $setting unless exists $value{$setting};
		$value{$setting} = $value;
	}
	my $conf = join('',
		map { "$_ = " . ($value{$_} =~ /^-?\d+$/ ? $value{$_} : "'" . ($value{$_} =~ s/'/''/gr) . "'") . "\n" }
		  @names);
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%init);
	$node->append_conf('postgresql.conf', $conf);
	$node->start;
	return $node;
}

# The shard id a node writes under: its system identifier (unless
# rollout_fdw.shard_id names another).
sub shard_of
{
	my ($node) = @_;
	return $node->safe_psql('postgres',
		'SELECT system_identifier FROM pg_control_system()');
}

sub slurp_bin
{
	my ($f) = @_;
	open(my $fh, '<:raw', $f) or return undef;
	local $/;
	my $b = <$fh>;
	close $fh;
	return $b // '';
}

sub write_bin
{
	my ($f, $b) = @_;
	open(my $fh, '>:raw', $f) or die "open $f: $!";
	print $fh $b;
	close $fh or die "close $f: $!";
	return;
}

# CRC32C (Castagnoli, as PostgreSQL's pg_crc32c) of a byte string.
my @crc32c_table;

sub crc32c
{
	my ($bytes) = @_;
	if (!@crc32c_table)
	{
		for my $i (0 .. 255)
		{
			my $c = $i;
			$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) for 1 .. 8;
			push @crc32c_table, $c;
		}
	}
	my $crc = 0xFFFFFFFF;
	$crc = $crc32c_table[ ($crc ^ $_) & 0xFF ] ^ ($crc >> 8) for unpack('C*', $bytes);
	return $crc ^ 0xFFFFFFFF;
}

# A manifest's JSON text sealed again after a test edited it (json_doc_seal
# in src/core/json_doc.c): its last member is the CRC32C of the text before.
sub reseal_json
{
	my ($text) = @_;
	$text =~ s/, "crc32c": "[0-9a-f]{8}"\}\z/}/;
	my $body = substr($text, 0, -1);
	return sprintf('%s, "crc32c": "%08x"}', $body, crc32c($body));
}

# The caller metadata of a segment (docs/FORMAT.md): the last field of the
# footer body, a u32 length and the text, right before the footer CRC.
# Returns the decoded JSON, or undef when the bytes are not a segment with
# JSON metadata.
sub segment_metadata
{
	my ($b) = @_;
	return undef unless defined $b && length($b) >= 16;
	my $n = length($b);
	return undef unless substr($b, $n - 4, 4) eq 'ROSG';
	my $footer_length = unpack('V', substr($b, $n - 8, 4));
	return undef if $footer_length < 4 || $footer_length > $n - 16;
	my $body = substr($b, $n - 8 - $footer_length, $footer_length - 4);
	# the metadata is a JSON object at the end of the body, followed in
	# format version 2 by the key filter section (docs/FORMAT.md)
	my $start = rindex($body, '{"kind"');
	return undef if $start < 5;
	my $len = unpack('V', substr($body, $start - 4, 4));
	return undef unless ord(substr($body, $start - 5, 1)) == 1 && $start + $len <= length($body);
	my $rest = length($body) - $start - $len;
	if ($rest > 0)
	{
		my $has_filter = ord(substr($body, $start + $len, 1));
		return undef if $has_filter == 1 && $rest < 13;
		my $filter_size = $has_filter
		  ? 1 + 4 + 8 + unpack('Q<', substr($body, $start + $len + 5, 8)) / 8
		  : 1;
		return undef unless $has_filter <= 1 && $rest >= $filter_size;

		# format version 4: the compression dictionaries follow, each a
		# u32 column and a u32-length-prefixed dictionary
		my $at = $start + $len + $filter_size;
		if (unpack('V', substr($b, 4, 4)) >= 4)
		{
			return undef if $at + 4 > length($body);
			my $count = unpack('V', substr($body, $at, 4));
			$at += 4;
			for (1 .. $count)
			{
				return undef if $at + 8 > length($body);
				$at += 8 + unpack('V', substr($body, $at + 4, 4));
			}
		}
		return undef unless $at == length($body);
	}
	my $doc = eval { decode_json(substr($body, $start, $len)) };
	return $doc;
}

# True when the positions are exactly 1..N, in order: no hole, none twice.
sub contiguous
{
	my @p = @_;
	for my $i (0 .. $#p)
	{
		return 0 if $p[$i] != $i + 1;
	}
	return 1;
}

# Runs $sql on $node every 100 ms until it returns $want: returns the
# seconds that took, counted from $t0 (default: now), or undef once
# $timeout seconds have passed.
sub poll_until
{
	my ($node, $sql, $want, $timeout, $t0) = @_;
	$t0 //= Time::HiRes::time();
	while (Time::HiRes::time() - $t0 < $timeout)
	{
		return Time::HiRes::time() - $t0 if $node->safe_psql('postgres', $sql) eq $want;
		Time::HiRes::usleep(100_000);
	}
	return undef;
}

# rollout_fdw.min_gc_grace is the server's setting (a session cannot lower
# it: a gc run there could delete what a writer in another session, trusting
# the configured value, is about to commit).  set_min_gc_grace sets it with
# ALTER SYSTEM, reloads, and waits until a new session has it ($seconds, a
# whole number); it returns the value it replaced.
sub set_min_gc_grace
{
	my ($node, $seconds) = @_;
	my $show = q{LOAD 'rollout_fdw'; SELECT setting FROM pg_settings WHERE name = 'rollout_fdw.min_gc_grace'};
	my $before = $node->safe_psql('postgres', $show);
	# (ALTER SYSTEM knows the setting only once the library is loaded)
	$node->safe_psql('postgres', "LOAD 'rollout_fdw'; ALTER SYSTEM SET rollout_fdw.min_gc_grace = $seconds");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	defined poll_until($node, $show, $seconds, 60)
	  or die "rollout_fdw.min_gc_grace did not become $seconds after a reload";
	return $before;
}

# Runs $code with rollout_fdw.min_gc_grace at $seconds on $node, then sets
# the value back; returns what $code returns.  The tests' gc runs at grace 0
# (of objects just written) go through here.
sub with_min_gc_grace
{
	my ($node, $seconds, $code) = @_;
	my $before = set_min_gc_grace($node, $seconds);
	my @result = eval { $code->() };
	my $error = $@;
	set_min_gc_grace($node, $before);
	die $error if $error;
	return wantarray ? @result : $result[0];
}

# Columns @cols of rollout_stat_stores for rollout store $store, as psql
# prints them ('|'-separated).
sub store_stats
{
	my ($node, $store, @cols) = @_;
	return $node->safe_psql('postgres',
		'SELECT ' . join(', ', @cols) . " FROM rollout_stat_stores WHERE store = '$store'");
}

my @OBSERVE_COLUMNS = qw(row_count exact_row_count base_rows fragments generations
  generation_rows unflushed_rows base_version wal_entries);

# rollout_observe($table, true) as a hash of column => value: the columns
# of $opts{columns} (default @OBSERVE_COLUMNS); with exact => 0 the cheap
# rollout_observe($table), which reads no data.
sub observe
{
	my ($node, $table, %opts) = @_;
	my @cols = @{ $opts{columns} // \@OBSERVE_COLUMNS };
	my $call = ($opts{exact} // 1)
	  ? "rollout_observe('$table', true)"
	  : "rollout_observe('$table')";
	my $row = $node->safe_psql('postgres', 'SELECT ' . join(', ', @cols) . " FROM $call");
	my %o;
	@o{@cols} = split /\|/, $row;
	return \%o;
}

# How many other sessions of $node are running a statement LIKE $pattern
# (an SQL LIKE pattern, quotes doubled).
sub still_running
{
	my ($node, $pattern) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '$pattern' AND pid <> pg_backend_pid()"
	);
}

# Waits until a session of $node logs, after log offset $offset, that it
# sleeps or holds at fault point $step (rollout_fdw.fail_at = 'step:sleep=N',
# 'step:hold' or 'step:hold=NAME').
sub wait_for_fault
{
	my ($node, $step, $offset) = @_;
	return $node->wait_for_log(qr/fault point "\Q$step\E" reached: (?:sleeping|holding)/, $offset);
}

# Release every backend held at a fault point with the action "hold"
# (src/core/fault.c), and let any that reaches one later pass; hold_faults
# makes them hold again.  With $name, the same for the action "hold=$name"
# only.
sub release_file
{
	my ($node, $name) = @_;
	return $node->data_dir . '/rollout_fault_release' . (defined $name ? ".$name" : '');
}

sub release_faults
{
	my ($node, $name) = @_;
	my $file = release_file($node, $name);
	open(my $fh, '>', $file) or die "could not create $file: $!";
	close($fh);
	return;
}

sub hold_faults
{
	my ($node, $name) = @_;
	unlink(release_file($node, $name));
	return;
}

# After a crash the postmaster of $node shuts down (TAP nodes run with
# restart_after_crash = off): waits for it to go, forgets its pid and starts
# it again. Returns whether it had stopped.
sub restart_after_crash
{
	my ($node) = @_;
	my $pidfile = $node->data_dir . '/postmaster.pid';
	for (1 .. 600)
	{
		last unless -e $pidfile;
		Time::HiRes::usleep(50_000);
	}
	my $stopped = !-e $pidfile;
	$node->stop('immediate', fail_ok => 1);    # only forgets the pid
	$node->start;
	return $stopped;
}

# How many times $re matches $node's log after offset $offset.
sub count_in_log
{
	my ($node, $re, $offset) = @_;
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile, $offset);
	my $n = () = $log =~ /$re/g;
	return $n;
}

# CREATE USER MAPPING FOR PUBLIC with statement logging off for it: TAP
# nodes log every statement (log_statement = all), and a statement that
# names a secret would put it in the log whatever the extension does.
sub create_mapping
{
	my ($node, $server, $options) = @_;
	$node->safe_psql('postgres',
		"SET log_statement = 'none';\nCREATE USER MAPPING FOR PUBLIC SERVER $server OPTIONS ($options);");
	return;
}

# SQL that may fail: returns (success, stdout, stderr, seconds it took), and
# adds stderr to @$stderr_seen (tests that check no secret is ever shown).
sub try_sql
{
	my ($node, $sql, $stderr_seen) = @_;
	my ($out, $err) = ('', '');
	my $t0 = Time::HiRes::time();
	my $rc = $node->psql('postgres', $sql, stdout => \$out, stderr => \$err);
	push @$stderr_seen, $err if $stderr_seen;
	return ($rc == 0, $out, $err, Time::HiRes::time() - $t0);
}

# Collect what the IPC::Run harness $h has printed so far, without waiting;
# false once its process has ended.  IPC::Run's pump_nb dies with "process
# ended prematurely" when the process ends between a pumpable() and the
# pump, which a polling loop cannot rule out: that is an end here, not an
# error.
sub pump_if_running
{
	my ($h) = @_;
	return 0 unless $h->pumpable;
	my $running;
	return $running ? 1 : 0 if eval { $running = $h->pump_nb; 1 };
	die $@ unless $@ =~ /process ended prematurely/;
	return 0;
}

# Run each SQL string of @$sqls in a psql of its own, all at once (say, racing
# first inserts), and wait for them: returns the number that failed and
# their stderrs, in order.
sub run_concurrently
{
	my ($node, $sqls) = @_;
	my @runs;
	for my $sql (@$sqls)
	{
		my $run = { out => '', err => '' };
		$run->{h} = IPC::Run::start(
			[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
			  '-c', $sql ],
			'>', \$run->{out}, '2>', \$run->{err});
		push @runs, $run;
	}
	my $failed = 0;
	for my $run (@runs)
	{
		$run->{h}->finish;
		$failed++ if $run->{h}->full_result(0) != 0;
	}
	return ($failed, map { $_->{err} } @runs);
}

# The node types of a decoded EXPLAIN (FORMAT JSON) plan tree, depth first.
sub plan_node_types
{
	my ($plan) = @_;
	return ($plan->{'Node Type'}, map { plan_node_types($_) } @{ $plan->{Plans} // [] });
}

# The Foreign Scan node of EXPLAIN (ANALYZE[, VERBOSE], FORMAT JSON) output
# (as psql prints it): its counters, such as 'Row Groups Read'.  Dies when
# the plan has none.
sub foreign_scan_of
{
	my ($json) = @_;
	return find_plan_node(decode_json($json)->[0]{Plan}, 'Foreign Scan')
	  // die "no Foreign Scan in the plan: $json";
}

# The first node of a decoded plan tree of type $type, or undef.
sub find_plan_node
{
	my ($plan, $type) = @_;
	return $plan if $plan->{'Node Type'} eq $type;
	for my $child (@{ $plan->{Plans} // [] })
	{
		my $found = find_plan_node($child, $type);
		return $found if $found;
	}
	return undef;
}

1;
