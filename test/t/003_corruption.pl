
# Copyright (c) rollout_fdw authors
#
# Backends: all  (scripts/test.sh runs it on every object store; test/perl/RolloutStore.pm)
#
# 003_corruption.pl — corrupt objects give a clean error, never a crash
# (DESIGN.md §4, §11.6; docs/FORMAT.md "How a reader validates").
#
# A flushed generation is truncated, has single bits flipped (in the header,
# every column chunk of every row group, the footer, its CRC and the trailer),
# has bytes cut out of its middle, has a page that claims more than its chunk
# holds, is replaced by garbage (plain, and garbage
# dressed with a valid header or trailer), by an empty file, and by a valid
# segment of another store.  Each time a SELECT must fail with SQLSTATE XX001
# and a message naming the object, and the server must stay up.  Restoring the
# original bytes restores the original result.  Then the same for a shard
# manifest, _store.json and a WAL entry of the unflushed tail.
#
# With the shared-memory writer (preload), scans on the writing cluster read
# the unflushed tail from the memtable, not from the WAL objects; the WAL
# entry is read after a restart (scans, rollout_flush and the claim's replay
# read the tail from the store until the first commit claims the shard), so
# that is where this test damages it in preload mode.
#
# Preloaded, footers live in the cluster's shared footer cache, kept by object
# name because objects never change once written.  A footer read before the
# damage was verified then and still describes the intact chunks, so damage
# confined to the footer or trailer is not seen until the footer is read from
# the store again: the test first proves that the warm cache still answers
# with the original rows (never with wrong ones), then restarts the cluster so
# that the footer is read cold and the damage is found.
#
# Runs against every backend (test/perl/RolloutStore.pm): objects are read,
# overwritten and deleted through the store's own interface.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use RolloutStore;
use RolloutTest qw(preload mode_node shard_of reseal_json crc32c);
use Test::More;

my $pre = preload();

my $node = mode_node('corruption');

my $store = RolloutStore->for_test('003_corruption');

$store->create_extension_and_server($node);
$node->safe_psql(
	'postgres', qq{
CREATE FOREIGN TABLE t (id text, v int, note text, payload jsonb) SERVER s OPTIONS (store 'damaged');
CREATE FOREIGN TABLE other (id text, x float8) SERVER s OPTIONS (store 'other');
});
my $shard = shard_of($node);

# Reads every column of every row, so that every chunk is decoded.
my $query = q{SELECT count(*), sum(v), md5(string_agg(id || ':' || v || ':' || coalesce(note, '-') || ':' || payload::text, ',' ORDER BY id)) FROM t};

# 300 rows in row groups of 100 (3 groups), some nulls, then one generation.
# pages of 1 kB: the payload and note chunks have several (format version 3)
$node->safe_psql('postgres', q{
SET rollout_fdw.rows_per_group = 100;
SET rollout_fdw.page_size = 1;
INSERT INTO t SELECT 'key-' || lpad(i::text, 4, '0'), i, CASE WHEN i % 7 = 0 THEN NULL ELSE 'note ' || i END,
                     jsonb_build_object('i', i, 'text', repeat('abc', i % 13))
FROM generate_series(1, 300) i;
SELECT rollout_flush('t');
});
$node->safe_psql('postgres', q{INSERT INTO other VALUES ('o1', 1.5), ('o2', 2.5); SELECT rollout_flush('other');});

my $original = $node->safe_psql('postgres', $query);
like($original, qr/^300\|45150\|[0-9a-f]{32}$/, 'the generation reads back 300 rows, sum 45150');

my ($gen_key) = $store->listed_generations('damaged', $shard);
ok($store->exists($gen_key), "the flush made $gen_key");
my $gen_bytes = slurp_object($gen_key);
my $size = length($gen_bytes);

# The bytes of an object that must exist.
sub slurp_object
{
	my ($key) = @_;
	my $b = $store->get($key);
	die "object $key does not exist" unless defined $b;
	return $b;
}

# The query must fail with SQLSTATE $state and a message naming $key, and the
# server must stay up.
sub expect_error
{
	my ($label, $key, %opt) = @_;
	my $state = $opt{state} // 'XX001';
	my $what = $opt{what} // qr/(?:segment|object) "[^"]*\Q$key\E"/;
	my $sql = $opt{sql} // $query;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	my $ok = isnt($ret, 0, "$label: the query fails");
	$ok &&= like($err, qr/ERROR:\s+$state: .*$what/, "$label: ERROR $state naming the object");
	diag("stderr: $err") unless $ok;
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$label: the server is still up");
}

# ---------------------------------------------------------------------------
# The segment's structure, from docs/FORMAT.md: chunk positions per column.
sub parse_segment
{
	my ($b) = @_;
	my $n = length($b);
	die "too short" if $n < 16;
	my $footer_length = unpack('V', substr($b, $n - 8, 4));
	die "bad trailer magic" unless substr($b, $n - 4, 4) eq 'ROSG';
	my $footer_start = $n - 8 - $footer_length;
	my $body = substr($b, $footer_start, $footer_length - 4);
	my $pos = 0;
	my $take = sub {
		my ($len, $fmt) = @_;
		die "footer overrun" if $pos + $len > length($body);
		my $v = substr($body, $pos, $len);
		$pos += $len;
		return defined $fmt ? unpack($fmt, $v) : $v;
	};
	my $string = sub { my $l = $take->(4, 'V'); return $take->($l); };
	my ($version, $flags, $ncol, $keycol) =
	  ($take->(4, 'V'), $take->(4, 'V'), $take->(4, 'V'), $take->(4, 'V'));
	my @names;
	for (1 .. $ncol)
	{
		push @names, $string->();
		$string->();                  # type_name
		$take->(4); $take->(4);       # typid, typmod
		$take->(2); $take->(1); $take->(1);    # typlen, typbyval, typalign
	}
	my $rows = $take->(8, 'q<');
	my $ngroups = $take->(4, 'V');
	my @chunks;
	for my $g (0 .. $ngroups - 1)
	{
		$take->(8);
		for my $c (0 .. $ncol - 1)
		{
			my $offset = $take->(8, 'q<');
			my $csize = $take->(8, 'q<');
			my $raw = $take->(8, 'q<');
			my $crc_at = $footer_start + $pos;
			$take->(4); $take->(8);    # crc, null_count
			if ($take->(1, 'C'))
			{
				$string->();
				$string->();
			}
			my $pages = 1;
			my @page_entries;
			if ($version >= 3)    # the page directory
			{
				$pages = $take->(4, 'V');
				for (1 .. ($pages > 1 ? $pages : 0))
				{
					my $at = $footer_start + $pos;
					my ($page_rows, $page_size) = ($take->(4, 'V'), $take->(4, 'V'));
					$take->(4);    # crc
					push @page_entries, { rows => $page_rows, size => $page_size, crc_at => $at + 8 };
				}
			}
			push @chunks, {
				group => $g, column => $names[$c], offset => $offset, size => $csize,
				raw_size => $raw, crc_at => $crc_at, pages => $pages, page_entries => \@page_entries };
		}
	}
	return {
		footer_start => $footer_start,
		footer_length => $footer_length,
		rows => $rows,
		groups => $ngroups,
		chunks => \@chunks,
		columns => \@names,
	};
}

my $layout = eval { parse_segment($gen_bytes) };
ok(defined $layout, 'the generation parses as docs/FORMAT.md describes') or diag($@);
$layout //= { chunks => [], footer_start => 8, footer_length => 12, groups => 0, rows => 0 };
is($layout->{rows}, 300, 'its footer says 300 rows');
is($layout->{groups}, 3, 'in 3 row groups');
cmp_ok(scalar(grep { $_->{pages} > 1 } @{ $layout->{chunks} }), '>=', 3,
	'of which chunks have several pages');

# Overwrites the generation with $bytes.  Preloaded, damage that leaves every
# byte before the footer intact is invisible to a footer cached before it (see
# the head of this file): the warm cache must still give the original answer,
# and a restart makes the next read take the footer from the store.
sub damage_generation
{
	my ($bytes, $label) = @_;
	my $fs = $layout->{footer_start};
	my $footer_only =
	  $pre
	  && length($bytes) >= $fs
	  && substr($bytes, 0, $fs) eq substr($gen_bytes, 0, $fs);
	if ($footer_only)
	{
		# the intact object again, read once so that its footer is cached
		$store->put($gen_key, $gen_bytes);
		$node->safe_psql('postgres', $query);
	}
	$store->put($gen_key, $bytes);
	return unless $footer_only;
	is($node->safe_psql('postgres', $query), $original,
		"$label: a footer cached before the damage still reads the intact chunks");
	$node->restart;
}

# ---------------------------------------------------------------------------
# (a) truncation to several lengths
for my $len (1, 7, 8, 9, 16, 100, int($size / 2), $size - 13, $size - 9, $size - 8, $size - 1)
{
	damage_generation(substr($gen_bytes, 0, $len), "truncated to $len of $size bytes");
	expect_error("truncated to $len of $size bytes", $gen_key);
}

# bytes cut out of the middle (the tail still looks right)
damage_generation(substr($gen_bytes, 0, 200) . substr($gen_bytes, 210), '10 bytes cut out');
expect_error('10 bytes cut out at offset 200', $gen_key);
# bytes inserted in the middle
damage_generation(substr($gen_bytes, 0, 200) . ("\0" x 10) . substr($gen_bytes, 200), '10 bytes inserted');
expect_error('10 bytes inserted at offset 200', $gen_key);

# (b) single flipped bits: header, every chunk, footer, footer CRC, trailer
my @flips = (0, 3, 4, 7);
for my $c (@{ $layout->{chunks} })
{
	push @flips, $c->{offset} + int($c->{size} / 2);
}
my $fs = $layout->{footer_start};
push @flips, $fs, $fs + 4, $fs + 9, $fs + int(($layout->{footer_length} - 4) / 2),
  $size - 13, $size - 12, $size - 9, ($size - 8 .. $size - 1);
my %seen;
@flips = grep { $_ >= 0 && $_ < $size && !$seen{$_}++ } @flips;
cmp_ok(scalar(@flips), '>=', 20, scalar(@flips) . ' offsets to flip a bit at');
for my $off (@flips)
{
	my $b = $gen_bytes;
	my $bit = $off % 8;
	substr($b, $off, 1) = chr(ord(substr($b, $off, 1)) ^ (1 << $bit));
	damage_generation($b, "bit $bit flipped at offset $off");
	my ($where) = map { "chunk of $_->{column}, group $_->{group}" }
	  grep { $off >= $_->{offset} && $off < $_->{offset} + $_->{size} } @{ $layout->{chunks} };
	$where //= $off < 8 ? 'header' : $off >= $size - 8 ? 'trailer' : 'footer';
	if ($where =~ /chunk of _(?:ts|shard|op),/)
	{
		# a scan of keys with one version each never needs their stamps
		# (they are decoded late, for the versions it compares), nor the
		# _op chunk of a row group whose statistics say it holds no
		# tombstone, so it may answer as before; a merge reads every
		# column and must fail
		my $out = $node->safe_psql('postgres', $query);
		is($out, $original, "bit $bit flipped at offset $off ($where): a scan, which needs no stamp, answers as before");
		expect_error("bit $bit flipped at offset $off ($where), merged", $gen_key,
			sql => q{SELECT * FROM rollout_merge('t', flush_first => false)});
		next;
	}
	expect_error("bit $bit flipped at offset $off ($where)", $gen_key);
}

# (c) garbage
srand(20240601);
my $garbage = join('', map { chr(int(rand(256))) } 1 .. $size);
damage_generation($garbage, 'random garbage of the same size');
expect_error('random garbage of the same size', $gen_key);
damage_generation("\0" x $size, 'zeros of the same size');
expect_error('zeros of the same size', $gen_key);
damage_generation(substr($gen_bytes, 0, 8) . substr($garbage, 8), 'garbage behind a valid header');
expect_error('garbage behind a valid header', $gen_key);
damage_generation(substr($garbage, 0, $size - 8) . pack('V', 64) . 'ROSG', 'garbage before a plausible trailer');
expect_error('garbage before a plausible trailer', $gen_key);
damage_generation(substr($gen_bytes, 0, $layout->{footer_start}) . substr($garbage, $layout->{footer_start}, $layout->{footer_length}) . substr($gen_bytes, $size - 8), 'garbage footer between valid data and trailer');
expect_error('garbage footer between valid data and trailer', $gen_key);
damage_generation("this is not a segment\n" x 50, 'a text file');
expect_error('a text file', $gen_key);

# (d) empty file
damage_generation('', 'an empty file');
expect_error('an empty file', $gen_key);

# a valid segment of another store (other schema) in its place
damage_generation(slurp_object(($store->listed_generations('other', $shard))[0]), 'a valid segment of another store');
expect_error('a valid segment of another store', $gen_key);

# (e) the pages of a chunk that together claim more than the chunk: page 1
# of a chunk of several pages replaced by a zstd frame whose content is the
# whole chunk's raw size, with every CRC made to match.  Each page could
# claim up to the chunk's raw size (up to 1 GB), and the sum was checked only
# once every page was decompressed and kept, so a segment of a few MB could
# make a backend allocate page_count times 1 GB.  Now a page may decompress
# to what the pages before it left of the chunk.
{
	my ($chunk) = grep { $_->{pages} > 1 && $_->{column} eq 'payload' } @{ $layout->{chunks} };
	ok(defined $chunk, 'a payload chunk of several pages') or $chunk = { page_entries => [ {}, { size => 0 } ] };
	my ($first, $second) = @{ $chunk->{page_entries} }[ 0, 1 ];
	my $raw = $chunk->{raw_size} // 0;

	# a frame of $raw bytes (content size in its header, RLE blocks of at
	# most 128 kB), then a skippable frame that pads it to the page's size
	my $frame = pack('V', 0xFD2FB528) . chr(0xE0) . pack('Q<', $raw);
	for (my $left = $raw; $left > 0;)
	{
		my $block = $left > 131072 ? 131072 : $left;
		$left -= $block;
		$frame .= substr(pack('V', ($left == 0 ? 1 : 0) | (1 << 1) | ($block << 3)), 0, 3) . 'x';
	}
	my $pad = $second->{size} - length($frame) - 8;
	cmp_ok($pad, '>=', 0, "page 1 ($second->{size} bytes) holds such a frame");
	$frame .= pack('V', 0x184D2A50) . pack('V', $pad) . ("\0" x $pad) if $pad >= 0;

	my $b = $gen_bytes;
	my $page_at = $chunk->{offset} + $first->{size};
	substr($b, $page_at, length($frame)) = $frame;
	substr($b, $second->{crc_at}, 4) = pack('V', crc32c($frame));
	substr($b, $chunk->{crc_at}, 4) = pack('V', crc32c(substr($b, $chunk->{offset}, $chunk->{size})));
	my $body_length = $layout->{footer_length} - 4;
	substr($b, $layout->{footer_start} + $body_length, 4) =
	  pack('V', crc32c(substr($b, $layout->{footer_start}, $body_length)));
	$store->put($gen_key, $b);
	$node->restart if $pre;    # the footer with the old CRCs is cached
	expect_error("page 1 of a chunk claims the chunk's whole raw size", $gen_key,
		what => qr/segment "[^"]*\Q$gen_key\E" is corrupt.*\n.*page 1 of chunk \d+ of row group \d+ is not a zstd frame of (\d+) bytes at most/);
	my ($err) = ($node->psql('postgres', $query))[2];
	my ($left) = $err =~ /is not a zstd frame of (\d+) bytes at most/;
	cmp_ok($left // $raw, '<', $raw, "at most what page 0 left of the chunk's $raw bytes");
	# a merge decodes each chunk whole (a scan, page by page as it needs them)
	expect_error("page 1 of a chunk claims the chunk's whole raw size, merged", $gen_key,
		sql => q{SELECT * FROM rollout_merge('t', flush_first => false)},
		what => qr/segment "[^"]*\Q$gen_key\E" is corrupt.*\n.*page 1 of chunk \d+ of row group \d+ is not a zstd frame of \d+ bytes at most/);
	$store->put($gen_key, $gen_bytes);
	$node->restart if $pre;
}

# restore: the original result again
$store->put($gen_key, $gen_bytes);
is($node->safe_psql('postgres', $query), $original, 'restoring the original bytes restores the result');

# a generation that is missing altogether: clean error, any SQLSTATE
$store->delete($gen_key) or die "$gen_key did not exist";
{
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$query");
	isnt($ret, 0, 'a missing generation: the query fails');
	like($err, qr/ERROR:\s+[0-9A-Z]{5}: .*\Q$gen_key\E/, 'a missing generation: the error names it');
	is($node->safe_psql('postgres', 'SELECT 1'), '1', 'a missing generation: the server is still up');
}
$store->put($gen_key, $gen_bytes);
is($node->safe_psql('postgres', $query), $original, 'restored again');

# ---------------------------------------------------------------------------
# A corrupt shard manifest: the newest one, which scans read.  plain: the
# flush committed version 1.  preload: the first commit's claim committed
# version 1 (writer_epoch 1, no generation) and the flush version 2.
my $manifest_version = $pre ? 2 : 1;
my $manifest_key = sprintf("damaged/shards/$shard/_manifest/%020d.json", $manifest_version);
ok($store->exists($manifest_key), "the flush committed $manifest_key");
is_deeply([ $store->manifest_versions("damaged/shards/$shard/_manifest") ],
	[ 1 .. $manifest_version ], "it is the newest shard manifest (version $manifest_version)");
my $manifest_bytes = slurp_object($manifest_key);
like($manifest_bytes, qr/"replay_after"/, 'the manifest is JSON with replay_after');

for my $len (int(length($manifest_bytes) / 2), length($manifest_bytes) - 1, 1)
{
	$store->put($manifest_key, substr($manifest_bytes, 0, $len));
	expect_error("manifest truncated to $len bytes", $manifest_key);
}
$store->put($manifest_key, '');
expect_error('empty manifest', $manifest_key);
$store->put($manifest_key, '[1, 2, 3]');
expect_error('a manifest that is valid JSON of the wrong shape', $manifest_key);
like($manifest_bytes, qr/, "crc32c": "[0-9a-f]{8}"\}\z/, 'the manifest ends with its CRC32C');
is(reseal_json($manifest_bytes), $manifest_bytes, "the test's CRC32C of the text is the one stored");
# a flipped digit of a position: without the seal the read would go on,
# skipping or repeating WAL entries without a word
(my $flipped = $manifest_bytes) =~ s/("replay_after":\s*)(\d)/$1 . ($2 ^ 1)/e;
isnt($flipped, $manifest_bytes, 'a digit of replay_after flipped');
$store->put($manifest_key, $flipped);
expect_error('a manifest with one flipped digit', $manifest_key,
	what => qr/object "[^"]*\Q$manifest_key\E" is corrupt.*\n.*DETAIL:\s+Its text does not match its checksum/);
(my $bad_seal = $manifest_bytes) =~ s/"crc32c": "[0-9a-f]{8}"/"crc32c": "0xz1"/;
$store->put($manifest_key, $bad_seal);
expect_error('a manifest whose seal is damaged', $manifest_key);
# a manifest of a build before seals: read as it is
(my $unsealed = $manifest_bytes) =~ s/, "crc32c": "[0-9a-f]{8}"\}\z/}/;
$store->put($manifest_key, $unsealed);
is($node->safe_psql('postgres', $query), $original, 'a manifest without a seal (an older build\'s) is read');
# a stamp no writer could make (the change feed adds to stamps; before, one
# from half the int64 range on crashed rollout_changes)
(my $far_stamp = $manifest_bytes) =~ s/"last_stamp":\s*\d+/"last_stamp": 4611686018427387904/;
$store->put($manifest_key, reseal_json($far_stamp));
expect_error('a manifest with a stamp out of range', $manifest_key);
# a position a writer's + 1 would wrap around (its next entry would be
# written where no listing shows it, acknowledged and never read)
(my $far_position = $manifest_bytes) =~ s/"replay_after":\s*\d+/"replay_after": 9223372036854775807/;
$store->put($manifest_key, reseal_json($far_position));
expect_error('a manifest with a position out of range', $manifest_key);
# a generation named outside the store's folder, by a dot part or by another
# store's name: it would read (and a flush adopt) what is not this store's
for my $outside ('damaged/shards/x/gen/../../../../other/base/data/f.seg', 'other/base/data/f.seg')
{
	(my $elsewhere = $manifest_bytes) =~ s/("file":\s*")[^"]+"/$1$outside"/;
	isnt($elsewhere, $manifest_bytes, "a generation renamed $outside");
	$store->put($manifest_key, reseal_json($elsewhere));
	expect_error("a generation named $outside", $manifest_key);
}
# the checks behind the seal still hold for a document sealed anew
(my $wrong_type = $manifest_bytes) =~ s/"replay_after":\s*\d+/"replay_after": "many"/;
$store->put($manifest_key, reseal_json($wrong_type));
expect_error('a manifest with a string where a number belongs', $manifest_key);
$store->put($manifest_key, "\x{ff}\x{fe}garbage\0\x01");
expect_error('binary garbage as manifest', $manifest_key);
# a generation's key range with its ends swapped: every read that skips by
# key range would skip its rows without a word
(my $reversed = $manifest_bytes) =~
  s/"min_key":\s*"([0-9a-f]+)"(.*?)"max_key":\s*"([0-9a-f]+)"/"min_key": "$3"$2"max_key": "$1"/s;
isnt($reversed, $manifest_bytes, 'the generation has a key range of distinct ends to swap');
$store->put($manifest_key, reseal_json($reversed));
expect_error('a manifest whose min_key is greater than its max_key', $manifest_key);
# a generation listed twice: flushes append generations and merges take them
# from the front, so a list out of order would make a merge drop the wrong ones
(my $twice = $manifest_bytes) =~ s/("generations":\s*\[)(\{[^{}]*\})\]/$1$2, $2]/s;
isnt($twice, $manifest_bytes, 'the generation listed twice');
$store->put($manifest_key, reseal_json($twice));
expect_error('a manifest that lists a generation twice', $manifest_key,
	what => qr/is corrupt.*\n.*DETAIL:\s+Generation \d+ is listed after a newer or equal one/);
$store->put($manifest_key, $manifest_bytes);
is($node->safe_psql('postgres', $query), $original, 'restoring the manifest restores the result');

# ---------------------------------------------------------------------------
# A corrupt _store.json: each psql run is a new session, which opens the store.
my $store_key = 'damaged/_store.json';
my $store_bytes = $store->get($store_key) // '';
ok(length($store_bytes) > 0, '_store.json exists');
$store->put($store_key, substr($store_bytes, 0, int(length($store_bytes) / 2)));
expect_error('_store.json truncated', $store_key);
$store->put($store_key, '');
expect_error('_store.json empty', $store_key);
$store->put($store_key, 'not json at all');
expect_error('_store.json garbage', $store_key);
expect_error('_store.json garbage, on INSERT', $store_key,
	sql => q{INSERT INTO t VALUES ('never', 1, NULL, '{}')});
$store->put($store_key, $store_bytes);
is($node->safe_psql('postgres', $query), $original, 'restoring _store.json restores the result');

# ---------------------------------------------------------------------------
# A corrupt WAL entry in the tail (after replay_after): committed, not flushed.
$node->safe_psql('postgres', q{INSERT INTO t SELECT 'tail-' || i, 1000 + i, 'tail', '{}' FROM generate_series(1, 20) i});
my $with_tail = $node->safe_psql('postgres', $query);
like($with_tail, qr/^320\|65360\|/, 'the WAL tail adds 20 rows');

# The newest WAL entry.  plain: position 2 (after the 300 rows at 1).
# preload: behind the fences of the claims that each restart above renews.
my $wal_folder = "damaged/shards/$shard/wal";
my $wal_position = ($store->wal_positions($wal_folder))[-1] // 0;
cmp_ok($wal_position, $pre ? '>=' : '==', $pre ? 3 : 2, "the tail is WAL entry $wal_position");
my $wal_key = $store->wal_key($wal_folder, $wal_position);
ok($store->exists($wal_key), "the insert made $wal_key");
my $wal_bytes = slurp_object($wal_key);
my $wal_size = length($wal_bytes);

if ($pre)
{
	# The memtable holds the tail; after a restart nothing does until a
	# commit claims the shard, and the tail is read from the WAL object.
	$node->stop;
	$node->start;
	is($node->safe_psql('postgres', $query), $with_tail,
		'after a restart the same tail is read from the WAL object');
}
my $manifests_before = join(',', $store->list("damaged/shards/$shard/_manifest/"));

for my $case (
	[ 'WAL entry truncated to half', substr($wal_bytes, 0, int($wal_size / 2)) ],
	[ 'WAL entry with its last byte gone', substr($wal_bytes, 0, $wal_size - 1) ],
	[ 'WAL entry with a bit flipped in the middle', do { my $b = $wal_bytes; my $o = int($wal_size / 3); substr($b, $o, 1) = chr(ord(substr($b, $o, 1)) ^ 0x10); $b } ],
	[ 'WAL entry of garbage', substr($garbage, 0, $wal_size) ],
	[ 'WAL entry empty', '' ])
{
	my ($label, $bytes) = @$case;
	$store->put($wal_key, $bytes);
	expect_error($label, $wal_key);
	expect_error("$label, rollout_flush", $wal_key,
		sql => q{SELECT * FROM rollout_flush('t')});
	# preload: the first commit claims the shard, and the claim replays
	# (flushes) the tail first: it must fail on the corrupt entry before it
	# commits a new epoch or writes a fence, and the commit with it.
	expect_error("$label, a commit (the claim's replay)", $wal_key,
		sql => q{INSERT INTO t VALUES ('never', 1, NULL, '{}')})
	  if $pre;
}
is(join(',', $store->list("damaged/shards/$shard/_manifest/")), $manifests_before,
	'no flush (or claim) over a corrupt WAL entry committed a manifest');
is_deeply([ $store->wal_positions($wal_folder) ], [ 1 .. $wal_position ],
	'no WAL entry or fence was written after the corrupt one');
$store->put($wal_key, $wal_bytes);
is($node->safe_psql('postgres', $query), $with_tail, 'restoring the WAL entry restores the result');
is($node->safe_psql('postgres', q{SELECT rows_flushed, generation FROM rollout_flush('t')}),
	'20|2', 'and it then flushes into generation 2');
is($node->safe_psql('postgres', $query), $with_tail, 'with the same result');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|server process .* was terminated/,
	'no backend crashed during all of this');

$node->stop;
done_testing();
