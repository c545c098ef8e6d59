
# Copyright (c) rollout_fdw authors
#
# RolloutStore.pm — the object store a TAP test runs against, and direct
# access to its objects.
#
# The behaviour suite runs against every backend (scripts/test.sh
# --backend=...); a test file that does says so with a header line
# "# Backends: all" (test.sh picks the files of a remote run by it).  Such a
# test asks for its store once:
#
#   my $store = RolloutStore->for_test('001_restart');
#   $node->safe_psql('postgres', $store->server_sql('s'));   # CREATE SERVER s ...
#
# and then inspects or damages objects through the same small interface
# whatever the backend is, with keys relative to the location (the keys the
# extension itself uses, e.g. "mystore/shards/<shard>/wal/000...1.wal"):
#
#   $store->list($prefix)      sorted keys under $prefix
#   $store->get($key)          the bytes, or undef when absent
#   $store->put($key, $bytes)  create or overwrite (tests damage objects)
#   $store->delete($key)       true when it existed
#   $store->exists($key)
#
# $store->create_extension_and_server($node) does both on a node, and the
# store layout helpers (objects_in, wal_positions, wal_entry, newest_manifest,
# listed_fragments, ...) read what the extension wrote.
#
# The backend comes from ROLLOUT_TEST_BACKEND:
#   file   (default) a fresh temporary directory, location file:///...
#   s3     moto:  ROLLOUT_TEST_S3_ENDPOINT, _REGION, _BUCKET, _ACCESS_KEY_ID,
#          _SECRET_ACCESS_KEY (test/servers/moto.sh env)
#   rgw    Ceph RGW, the same variables with ROLLOUT_TEST_RGW_ (rgw.sh env)
#   azure  Azurite: ROLLOUT_TEST_AZURE_ENDPOINT, _KEY, _CONTAINER
#          (test/servers/azurite.sh env)
# A remote store gets a fresh prefix per test and run (and, on moto and
# Azurite, a bucket or container of its own: _own_name), so runs never see
# each other's objects.
#
# Requests are signed here with core Perl only (HTTP::Tiny, Digest::SHA):
# SigV4 for S3, Shared Key for Azure Blob — independently of the C code, so
# a signing bug in one is not hidden by the same bug in the other.

package RolloutStore;

use strict;
use warnings;
use feature 'state';

use Carp;
use Digest::SHA qw(sha256_hex hmac_sha256 hmac_sha256_hex);
use File::Basename qw(dirname);
use File::Path qw(make_path);
use HTTP::Tiny;
use JSON::PP ();
use MIME::Base64 qw(encode_base64 decode_base64);
use POSIX qw(strftime);

use RolloutTest ();

# The backend the suite runs against.
sub backend
{
	my $b = $ENV{ROLLOUT_TEST_BACKEND} || 'file';
	croak "unknown ROLLOUT_TEST_BACKEND \"$b\" (file, s3, rgw or azure)"
	  unless $b =~ /^(file|s3|rgw|azure)$/;
	return $b;
}

# Is the suite running against a remote object store?
sub remote { return backend() ne 'file'; }

# A store for one test.  $name distinguishes stores within the test
# (a test may need several locations).  backend => NAME picks a backend
# other than the suite's (tests of one backend's own features).
sub for_test
{
	my ($class, $name, %opts) = @_;
	my $backend = $opts{backend} // backend();
	my $self = bless { backend => $backend, name => $name }, $class;
	my $run = sprintf('%s-%d-%d-%04d', $name, $$, time, int(rand(10000)));

	$self->{http} = HTTP::Tiny->new(timeout => 60, keep_alive => 1)
	  unless $backend eq 'file';
	if ($backend eq 'file')
	{
		require PostgreSQL::Test::Utils;
		$self->{dir} = PostgreSQL::Test::Utils::tempdir('rollout_store');
		$self->{location} = "file://$self->{dir}";
	}
	elsif ($backend eq 's3' || $backend eq 'rgw')
	{
		my $v = $backend eq 's3' ? 'S3' : 'RGW';
		for my $k (qw(ENDPOINT BUCKET ACCESS_KEY_ID SECRET_ACCESS_KEY))
		{
			croak "ROLLOUT_TEST_${v}_$k is not set (start the server: test/servers/"
			  . ($backend eq 's3' ? 'moto' : 'rgw') . '.sh start)'
			  unless defined $ENV{"ROLLOUT_TEST_${v}_$k"};
		}
		$self->{endpoint} = $ENV{"ROLLOUT_TEST_${v}_ENDPOINT"};
		$self->{region} = $ENV{"ROLLOUT_TEST_${v}_REGION"} || 'us-east-1';
		$self->{bucket} = $ENV{"ROLLOUT_TEST_${v}_BUCKET"};
		$self->{access_key_id} = $ENV{"ROLLOUT_TEST_${v}_ACCESS_KEY_ID"};
		$self->{secret_access_key} = $ENV{"ROLLOUT_TEST_${v}_SECRET_ACCESS_KEY"};
		$self->{prefix} = "suite/$run";
		$self->{location} = "s3://$self->{bucket}/$self->{prefix}";
		$self->_own_bucket($name) if $backend eq 's3';
	}
	else
	{
		for my $k (qw(ENDPOINT KEY CONTAINER))
		{
			croak "ROLLOUT_TEST_AZURE_$k is not set (start Azurite: test/servers/azurite.sh start)"
			  unless defined $ENV{"ROLLOUT_TEST_AZURE_$k"};
		}
		$self->{endpoint} = $ENV{ROLLOUT_TEST_AZURE_ENDPOINT};
		$self->{endpoint} =~ s{/+$}{};
		($self->{account}) = $self->{endpoint} =~ m{/([^/]+)$};
		$self->{account_key} = $ENV{ROLLOUT_TEST_AZURE_KEY};
		$self->{container} = $ENV{ROLLOUT_TEST_AZURE_CONTAINER};
		$self->{prefix} = "suite/$run";
		$self->_own_container($name);
	}
	return $self;
}

# moto answers a listing by walking every object of the bucket, so with one
# bucket for the whole suite each listing cost more the more earlier tests
# had written: 30 ms of moto's CPU per listing by the middle of a run, and
# moto took a sixth of the CI machine.  On moto each store of a test gets a
# bucket of its own, and on Azurite (which filters a listing out of every
# blob it holds) a container of its own; a test that needs the suite's
# bucket or container, to share it or to name it, reads the environment.
# Ceph RGW keeps a sorted bucket index and lists by prefix, so there the
# suite's bucket serves.
sub _own_name
{
	my ($name) = @_;
	(my $own = lc("rt-$name")) =~ s/[^a-z0-9]+/-/g;
	($own = substr($own, 0, 40)) =~ s/-+$//;	# no "--" (Azure)
	# not from rand(): tests seed it before they ask for a store
	state $count = 0;
	return $own . sprintf('-%d-%d-%d', $$, time() % 100000, ++$count);
}

sub _own_container
{
	my ($self, $name) = @_;
	$self->{container} = _own_name($name);
	my $r = $self->_request('PUT', undef, { restype => 'container' }, '');
	# a retry after a request that did create it finds it there
	_check($r, "CREATE CONTAINER $self->{container}") unless $r->{status} == 409;
	$self->{location} = "az://$self->{account}/$self->{container}/$self->{prefix}";
	return;
}

sub _own_bucket
{
	my ($self, $name) = @_;
	my $bucket = _own_name($name);
	my $body = $self->{region} eq 'us-east-1' ? ''
	  : '<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
	  . "<LocationConstraint>$self->{region}</LocationConstraint></CreateBucketConfiguration>";
	$self->{bucket} = $bucket;
	my $r = $self->_request('PUT', undef, {}, $body);
	# a retry after a request that did create it finds it there
	_check($r, "CREATE BUCKET $bucket") unless $r->{status} == 409;
	$self->{location} = "s3://$bucket/$self->{prefix}";
	return;
}

# The development key Azurite publishes, for ROLLOUT_TEST_AZURE_KEY unset.
our $AZURITE_KEY =
  'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

# The settings of the suite's Azurite (test/servers/azurite.sh env), for
# tests that set up servers of their own: (endpoint, key, container); the
# endpoint is undef when Azurite is not running, the others have defaults.
sub azure_settings
{
	return ($ENV{ROLLOUT_TEST_AZURE_ENDPOINT},
		$ENV{ROLLOUT_TEST_AZURE_KEY} // $AZURITE_KEY,
		$ENV{ROLLOUT_TEST_AZURE_CONTAINER} // 'rollout-test');
}

# Likewise for S3: (endpoint, bucket, region) of moto ($which 'S3',
# test/servers/moto.sh env) or of Ceph RGW ($which 'RGW', rgw.sh env).
sub s3_settings
{
	my ($which) = @_;
	return ($ENV{"ROLLOUT_TEST_${which}_ENDPOINT"},
		$ENV{"ROLLOUT_TEST_${which}_BUCKET"} // 'rollout-test',
		$ENV{"ROLLOUT_TEST_${which}_REGION"} // 'us-east-1');
}

sub location { return $_[0]->{location}; }

# The directory of a file:// store (undef for remote stores).
sub dir { return $_[0]->{dir}; }

# The local path of an object of a file:// store.
sub path
{
	my ($self, $key) = @_;
	croak 'path() is only defined for file:// stores' unless $self->{dir};
	return "$self->{dir}/$key";
}

# SQL that creates foreign server $server for this store, with the user
# mapping holding the credentials of a remote store.  %opts adds server
# options or replaces the store's own (e.g. request_timeout => 5, or
# endpoint => a proxy in front of the server).
sub server_sql
{
	my ($self, $server, %opts) = @_;
	my @options = ([ location => $self->{location} ]);
	my @mapping;

	if ($self->{backend} eq 's3' || $self->{backend} eq 'rgw')
	{
		push @options, [ endpoint => $self->{endpoint} ], [ region => $self->{region} ];
		@mapping = (
			[ access_key_id => $self->{access_key_id} ],
			[ secret_access_key => $self->{secret_access_key} ]);
	}
	elsif ($self->{backend} eq 'azure')
	{
		push @options, [ endpoint => $self->{endpoint} ];
		@mapping = ([ account_key => $self->{account_key} ]);
	}
	for my $o (@options)
	{
		$o->[1] = delete $opts{ $o->[0] } if exists $opts{ $o->[0] };
	}
	push @options, map { [ $_ => $opts{$_} ] } sort keys %opts;

	my $quote = sub { my $s = shift; $s =~ s/'/''/g; return "'$s'"; };
	my $list = sub { join(', ', map { "$_->[0] " . $quote->($_->[1]) } @_) };
	my $sql = "CREATE SERVER $server FOREIGN DATA WRAPPER rollout_fdw OPTIONS ("
	  . $list->(@options) . ");\n";
	$sql .= "CREATE USER MAPPING FOR PUBLIC SERVER $server OPTIONS ("
	  . $list->(@mapping) . ");\n"
	  if @mapping;
	return $sql;
}

# CREATE EXTENSION rollout_fdw and the foreign server $server (default "s")
# for this store (server_sql; %opts as there), on $node's database postgres.
sub create_extension_and_server
{
	my ($self, $node, $server, %opts) = @_;
	$node->safe_psql('postgres',
		'CREATE EXTENSION rollout_fdw;' . $self->server_sql($server // 's', %opts));
	return;
}

# ---------------------------------------------------------------------------
# The store layout (docs/FORMAT.md, DESIGN.md §2), for tests that look at
# what the extension wrote.  $folder arguments are key prefixes without the
# trailing slash, e.g. "mystore/shards/$shard/wal".

# The keys of the objects directly in a folder (not in sub-folders).
sub objects_in
{
	my ($self, $folder) = @_;
	return grep { index(substr($_, length($folder) + 1), '/') < 0 }
	  $self->list("$folder/");
}

# The versions (numbers) of the manifests in a _manifest folder, ascending.
sub manifest_versions
{
	my ($self, $folder) = @_;
	return map { m{/(\d{20})\.json$} ? $1 + 0 : () } $self->objects_in($folder);
}

# The newest manifest of a _manifest folder, decoded, or undef.
sub newest_manifest
{
	my ($self, $folder) = @_;
	my @v = $self->manifest_versions($folder);
	return undef unless @v;
	return JSON::PP::decode_json($self->get(sprintf('%s/%020d.json', $folder, $v[-1])));
}

# The files (keys) of the fragments the newest base manifest of rollout
# store $name lists, sorted; none when it has no base manifest yet.
sub listed_fragments
{
	my ($self, $name) = @_;
	my $base = $self->newest_manifest("$name/base/_manifest");
	return () unless $base;
	return sort map { $_->{file} } @{ $base->{fragments} };
}

# The files (keys) of the generations the newest manifest of shard $shard
# of rollout store $name lists, sorted; none when it has no manifest yet.
sub listed_generations
{
	my ($self, $name, $shard) = @_;
	my $manifest = $self->newest_manifest("$name/shards/$shard/_manifest");
	return () unless $manifest;
	return sort map { $_->{file} } @{ $manifest->{generations} };
}

# The WAL positions named by object keys (of any listing, with any
# prefix): the numbers of the keys ending in /<20 digits>.wal, ascending.
sub wal_positions_of
{
	my @keys = @_;
	return sort { $a <=> $b } map { m{/(\d{20})\.wal$} ? $1 + 0 : () } @keys;
}

# Positions of the WAL entries (fence markers included) in a wal folder.
# With required => 1 it dies when there is none (a test that has written).
sub wal_positions
{
	my ($self, $folder, %opts) = @_;
	my @p = wal_positions_of($self->objects_in($folder));
	croak "no WAL entries in $folder" if $opts{required} && !@p;
	return @p;
}

# The key of the WAL entry at position $p.
sub wal_key
{
	my ($self, $folder, $p) = @_;
	return sprintf('%s/%020d.wal', $folder, $p);
}

# The metadata of the WAL entry at position $p (RolloutTest::segment_metadata),
# or undef if it is absent or unreadable.
sub wal_entry
{
	my ($self, $folder, $p) = @_;
	return RolloutTest::segment_metadata($self->get($self->wal_key($folder, $p)));
}

# [position, metadata] of every entry in the folder, in position order.
sub wal_entries
{
	my ($self, $folder) = @_;
	return map { [ $_, $self->wal_entry($folder, $_) ] } $self->wal_positions($folder);
}

# Leftovers of unfinished writes, which are not objects of the store (list()
# never shows them): the file:// backend's temporary files under <root>/_tmp/
# (as keys "_tmp/<name>"), S3 multipart uploads in progress under the
# location, and Azure blobs under the location that have uncommitted blocks
# only (Put Block without a Put Block List).  A successful write, and a
# failed one that cleaned up after itself, leaves none.
sub scratch
{
	my ($self) = @_;
	if ($self->{dir})
	{
		opendir(my $dh, "$self->{dir}/_tmp") or return ();
		my @keys = map { "_tmp/$_" } grep { !/^\.\.?$/ } readdir($dh);
		closedir($dh);
		return sort @keys;
	}
	if ($self->{bucket})
	{
		my (@keys, %q);
		do
		{
			my $r = $self->_request('GET', undef,
				{ uploads => '', prefix => "$self->{prefix}/", %q });
			_check($r, 'LIST multipart uploads');
			my $xml = $r->{content};
			push @keys, map { substr(_xml_unescape($_), length($self->{prefix}) + 1) }
			  $xml =~ m{<Upload>.*?<Key>(.*?)</Key>.*?</Upload>}gs;
			%q = ();
			if ($xml =~ m{<IsTruncated>true</IsTruncated>})
			{
				($q{'key-marker'}) = $xml =~ m{<NextKeyMarker>(.*?)</NextKeyMarker>};
				($q{'upload-id-marker'}) = $xml =~ m{<NextUploadIdMarker>(.*?)</NextUploadIdMarker>};
				$q{$_} = _xml_unescape($q{$_}) for keys %q;
			}
		} while (%q);
		return sort @keys;
	}
	my %committed = map { $_ => 1 } $self->list('');
	return grep { !$committed{$_} } $self->_azure_list('', 'uncommittedblobs');
}

# Every object under $prefix with its size in bytes: a hash ref key => size
# (what gc's bytes_freed counts).  An object deleted between the listing and
# reading its size is left out.
sub sizes
{
	my ($self, $prefix) = @_;
	my %s;
	for my $key ($self->list($prefix))
	{
		my $bytes = $self->get($key);
		$s{$key} = length($bytes) if defined $bytes;
	}
	return \%s;
}

# ---------------------------------------------------------------------------
# Object access

sub list
{
	my ($self, $prefix) = @_;
	$prefix //= '';
	return $self->_file_list($prefix) if $self->{dir};
	return $self->_s3_list($prefix) if $self->{bucket};
	return $self->_azure_list($prefix);
}

sub get
{
	my ($self, $key) = @_;
	if ($self->{dir})
	{
		open(my $fh, '<:raw', $self->path($key)) or return $self->_wal_log_get($key);
		local $/;
		my $b = <$fh>;
		close $fh;
		return $b // '';
	}
	my $r = $self->_request('GET', $key);
	return undef if $r->{status} == 404;
	_check($r, "GET $key");
	return $r->{content} // '';
}

sub exists
{
	my ($self, $key) = @_;
	return (-f $self->path($key) || defined $self->_wal_log_record($key)) ? 1 : 0
	  if $self->{dir};
	my $r = $self->_request('HEAD', $key);
	return 0 if $r->{status} == 404;
	_check($r, "HEAD $key");
	return 1;
}

sub put
{
	my ($self, $key, $bytes) = @_;
	if ($self->{dir})
	{
		my $path = $self->path($key);
		make_path(dirname($path));
		open(my $fh, '>:raw', $path) or croak "open $path: $!";
		print $fh $bytes;
		close $fh or croak "close $path: $!";
		return;
	}
	my %headers;
	$headers{'x-ms-blob-type'} = 'BlockBlob' if $self->{backend} eq 'azure';
	_check($self->_request('PUT', $key, {}, $bytes, \%headers), "PUT $key");
	return;
}

sub delete
{
	my ($self, $key) = @_;
	if ($self->{dir})
	{
		my $in_log = $self->_wal_log_delete($key);
		return (unlink($self->path($key)) || $in_log) ? 1 : 0;
	}
	my $existed = $self->exists($key);
	my $r = $self->_request('DELETE', $key);
	return 0 if $r->{status} == 404;
	_check($r, "DELETE $key");
	return $existed;
}

# Delete every object under $prefix; returns how many.
sub delete_prefix
{
	my ($self, $prefix) = @_;
	my $n = 0;
	$n += $self->delete($_) for $self->list($prefix);
	return $n;
}

sub _check
{
	my ($r, $what) = @_;
	return if $r->{success};
	my $body = $r->{content} // '';
	$body = substr($body, 0, 300);
	croak "object store request $what failed: $r->{status} $r->{reason} $body";
}

sub _file_list
{
	my ($self, $prefix) = @_;
	my @keys;
	my @dirs = ($self->{dir});
	while (defined(my $d = shift @dirs))
	{
		opendir(my $dh, $d) or next;
		for my $e (readdir($dh))
		{
			next if $e eq '.' || $e eq '..';
			my $p = "$d/$e";
			if (-d $p) { push @dirs, $p; next; }
			my $key = substr($p, length($self->{dir}) + 1);
			# the file:// backend's own scratch area is not part of the store
			next if $key =~ m{^_tmp/};
			# a WAL log's own files: its entries are listed instead
			if ($key =~ m{(^|/)wal/_log\.[^/]*$})
			{
				next unless $e =~ /^_log\.\d{20}$/;
				my $folder = substr($key, 0, length($key) - length($e));
				push @keys, grep { substr($_, 0, length($prefix)) eq $prefix }
				  map { sprintf('%s%020d.wal', $folder, $_) }
				  keys %{ _wal_log_segment_records($p) };
				next;
			}
			push @keys, $key if substr($key, 0, length($prefix)) eq $prefix;
		}
		closedir($dh);
	}
	my %seen;
	return grep { !$seen{$_}++ } sort @keys;
}

# ---------------------------------------------------------------------------
# WAL logs of file:// stores (src/objstore/file_wal_log.c): the entries of a
# folder ".../wal/" appended to segments "_log.<first position, 20 digits>",
# 1,024 positions each: a 64-byte header, then records of a 96-byte header
# (state, CRC, segment, position, length, CRC, time, put id) and the entry,
# each at an 8-byte boundary.  CRCs are not checked here; a record that does
# not look like one ends the segment.

my $WAL_LOG_LIVE = 0x45564c52;
my $WAL_LOG_DEAD = 0x44414552;

# { position => [offset, length] } of the live records of a segment file.
sub _wal_log_segment_records
{
	my ($path) = @_;
	my ($first) = $path =~ /_log\.(\d{20})$/ or return {};
	open(my $fh, '<:raw', $path) or return {};
	local $/;
	my $bytes = <$fh> // '';
	close $fh;
	my %records;
	my $offset = 64;
	while ($offset + 96 <= length($bytes))
	{
		my ($state, undef, $segment, $position, $length) =
		  unpack('L< L< q< q< L<', substr($bytes, $offset, 28));
		last unless ($state == $WAL_LOG_LIVE || $state == $WAL_LOG_DEAD)
		  && $segment == $first && $position >= $first
		  && $position < $first + 1024 && $offset + 96 + $length <= length($bytes);
		$records{$position} = [ $offset, $length ] if $state == $WAL_LOG_LIVE;
		$offset += 96 + $length;
		$offset += 8 - $offset % 8 if $offset % 8;
	}
	return \%records;
}

# [segment path, offset, length] of the live record of a WAL entry's key in
# its folder's log, or undef.
sub _wal_log_record
{
	my ($self, $key) = @_;
	my ($folder, $position) = $key =~ m{^(.*?(?:^|/)wal)/(\d{20})\.wal$} or return undef;
	my $first = $position - $position % 1024;
	my $path = sprintf('%s/%s/_log.%020d', $self->{dir}, $folder, $first);
	my $record = _wal_log_segment_records($path)->{ $position + 0 } or return undef;
	return [ $path, @$record ];
}

sub _wal_log_get
{
	my ($self, $key) = @_;
	my $record = $self->_wal_log_record($key) or return undef;
	my ($path, $offset, $length) = @$record;
	open(my $fh, '<:raw', $path) or return undef;
	seek($fh, $offset + 96, 0);
	read($fh, my $b, $length);
	close $fh;
	return $b;
}

# CRC-32C (Castagnoli), as PostgreSQL's pg_crc32c computes it.
my @CRC32C_TABLE = map {
	my $c = $_;
	$c = ($c & 1) ? (($c >> 1) ^ 0x82F63B78) : ($c >> 1) for 1 .. 8;
	$c;
} 0 .. 255;

sub crc32c
{
	my ($bytes) = @_;
	my $crc = 0xFFFFFFFF;
	$crc = $CRC32C_TABLE[ ($crc ^ $_) & 0xFF ] ^ ($crc >> 8) for unpack('C*', $bytes);
	return $crc ^ 0xFFFFFFFF;
}

# Make an object look last modified at $time (seconds since the epoch), as
# gc sees it: a file's modification time, or the creation time in a WAL log
# record's header (whose CRC is computed again).  Dies if there is no such
# object.
sub set_modified
{
	my ($self, $key, $time) = @_;
	croak 'set_modified() is only defined for file:// stores' unless $self->{dir};
	return if utime($time, $time, $self->path($key));
	my $record = $self->_wal_log_record($key) or croak "no object $key: $!";
	my ($path, $offset) = @$record;
	open(my $fh, '+<:raw', $path) or croak "open $path: $!";
	seek($fh, $offset, 0);
	read($fh, my $header, 96) == 96 or croak "read $path";
	# TimestampTz: microseconds since 2000-01-01, at bytes 32..39
	substr($header, 32, 8) = pack('q<', ($time - 946_684_800) * 1_000_000);
	substr($header, 4, 4) = pack('L<', crc32c(substr($header, 8)));
	seek($fh, $offset, 0);
	print $fh $header;
	close $fh or croak "close $path: $!";
	_wal_log_bump_counter(dirname($path) . '/_log.lock');
	return;
}

# Move a WAL log's counter of deletions on (its lock file's first 8 bytes),
# which makes every backend read the log again.
sub _wal_log_bump_counter
{
	my ($lock_path) = @_;
	open(my $lock, '+<:raw', $lock_path) or croak "open $lock_path: $!";
	seek($lock, 0, 0);
	read($lock, my $counter, 8);
	$counter = length($counter // '') == 8 ? unpack('Q<', $counter) : 0;
	seek($lock, 0, 0);
	print $lock pack('Q<', $counter + 1);
	close $lock or croak "close $lock_path: $!";
	return;
}

# Delete a WAL entry from its folder's log as the backend does: under the
# log's lock, its state made dead and its bytes zeros, and the lock file's
# counter of deletions moved on so that backends read the log again.
sub _wal_log_delete
{
	my ($self, $key) = @_;
	return 0 unless $key =~ m{(?:^|/)wal/\d{20}\.wal$};
	my $lock_path = dirname($self->path($key)) . '/_log.lock';
	open(my $lock, '+<:raw', $lock_path) or return 0;
	# F_OFD_SETLKW (38), struct flock { short type = F_WRLCK, whence; off_t start, len; pid_t pid }
	my $flock = pack('s s x4 q q l x4', 1, 0, 0, 0, 0);
	fcntl($lock, 38, $flock) or croak "lock $lock_path: $!";
	my $record = $self->_wal_log_record($key);
	if ($record)
	{
		my ($path, $offset, $length) = @$record;
		open(my $fh, '+<:raw', $path) or croak "open $path: $!";
		seek($fh, $offset, 0);
		print $fh pack('L<', $WAL_LOG_DEAD);
		seek($fh, $offset + 96, 0);
		print $fh "\0" x $length;
		close $fh or croak "close $path: $!";
		seek($lock, 0, 0);
		read($lock, my $counter, 8);
		$counter = length($counter // '') == 8 ? unpack('Q<', $counter) : 0;
		seek($lock, 0, 0);
		print $lock pack('Q<', $counter + 1);
	}
	close $lock;
	return $record ? 1 : 0;
}

# Percent-encoding of the unreserved set, '/' kept or not.
sub _uri_encode
{
	my ($s, $keep_slash) = @_;
	my $re = $keep_slash ? qr{([^A-Za-z0-9\-_.~/])} : qr{([^A-Za-z0-9\-_.~])};
	$s =~ s/$re/sprintf('%%%02X', ord($1))/ge;
	return $s;
}

sub _xml_unescape
{
	my ($s) = @_;
	$s =~ s/&lt;/</g;
	$s =~ s/&gt;/>/g;
	$s =~ s/&quot;/"/g;
	$s =~ s/&apos;/'/g;
	$s =~ s/&amp;/&/g;
	return $s;
}

# One request to the remote store.  $key is relative to the location; undef
# addresses the bucket/container itself (listings).
#
# Like any client of an object store, the harness retries what may be
# transient: no answer (HTTP::Tiny reports 599: refused, reset, timed out)
# and 5xx.  Every request here is idempotent (PUT overwrites with the same
# bytes).  The emulators sometimes pause for many seconds under the suite's
# load (Azurite's in-memory store); a test must not fail for that.
sub _request
{
	my ($self, $method, $key, $query, $body, $headers) = @_;
	my $r;
	for my $attempt (1 .. 4)
	{
		$r = $self->{bucket}
		  ? $self->_s3_request($method, $key, $query, $body, $headers)
		  : $self->_azure_request($method, $key, $query, $body, $headers);
		last unless $r->{status} == 599 || $r->{status} >= 500;
		sleep $attempt;
	}
	return $r;
}

# --- S3, SigV4 --------------------------------------------------------------

sub _s3_request
{
	my ($self, $method, $key, $query, $body, $extra) = @_;
	$query //= {};
	$body //= '';
	my ($scheme, $host) = $self->{endpoint} =~ m{^(https?)://([^/]+)}
	  or croak "bad endpoint $self->{endpoint}";
	my $path = "/$self->{bucket}";
	$path .= '/' . _uri_encode("$self->{prefix}/$key", 1) if defined $key;
	my $canonical_query = join('&',
		map { _uri_encode($_) . '=' . _uri_encode($query->{$_}) } sort keys %$query);
	my $payload_hash = sha256_hex($body);
	my @t = gmtime();
	my $amz_date = strftime('%Y%m%dT%H%M%SZ', @t);
	my $day = strftime('%Y%m%d', @t);

	my %headers = (
		'host' => $host,
		'x-amz-content-sha256' => $payload_hash,
		'x-amz-date' => $amz_date,
		%{ $extra // {} });
	my @names = sort map { lc } keys %headers;
	my %lc = map { lc($_) => $headers{$_} } keys %headers;
	my $canonical_headers = join('', map { "$_:$lc{$_}\n" } @names);
	my $signed_headers = join(';', @names);
	my $canonical_request = join("\n",
		$method, $path, $canonical_query, $canonical_headers,
		$signed_headers, $payload_hash);
	my $scope = "$day/$self->{region}/s3/aws4_request";
	my $to_sign = join("\n",
		'AWS4-HMAC-SHA256', $amz_date, $scope, sha256_hex($canonical_request));
	my $k = hmac_sha256($day, "AWS4$self->{secret_access_key}");
	$k = hmac_sha256($self->{region}, $k);
	$k = hmac_sha256('s3', $k);
	$k = hmac_sha256('aws4_request', $k);
	my $signature = hmac_sha256_hex($to_sign, $k);

	delete $lc{host};	# HTTP::Tiny sends it, as signed
	$lc{authorization} =
	  "AWS4-HMAC-SHA256 Credential=$self->{access_key_id}/$scope, "
	  . "SignedHeaders=$signed_headers, Signature=$signature";
	my $url = "$scheme://$host$path" . ($canonical_query ne '' ? "?$canonical_query" : '');
	my %args = (headers => \%lc);
	$args{content} = $body if $method eq 'PUT';
	return $self->{http}->request($method, $url, \%args);
}

sub _s3_list
{
	my ($self, $prefix) = @_;
	my $full = "$self->{prefix}/$prefix";
	my (@keys, $token);
	do
	{
		my %q = ('list-type' => 2, prefix => $full);
		$q{'continuation-token'} = $token if defined $token;
		my $r = $self->_request('GET', undef, \%q);
		_check($r, "LIST $prefix");
		my $xml = $r->{content};
		push @keys, map { substr(_xml_unescape($_), length($self->{prefix}) + 1) }
		  $xml =~ m{<Key>(.*?)</Key>}g;
		($token) = $xml =~ m{<NextContinuationToken>(.*?)</NextContinuationToken>};
		$token = _xml_unescape($token) if defined $token;
		$token = undef unless $xml =~ m{<IsTruncated>true</IsTruncated>};
	} while (defined $token);
	return sort @keys;
}

# --- Azure Blob, Shared Key -------------------------------------------------

sub _azure_request
{
	my ($self, $method, $key, $query, $body, $extra) = @_;
	$query //= {};
	my ($scheme, $host, $endpoint_path) = $self->{endpoint} =~ m{^(https?)://([^/]+)(/.*)?$}
	  or croak "bad endpoint $self->{endpoint}";
	$endpoint_path //= '';
	my $path = "/$self->{container}";
	$path .= '/' . _uri_encode("$self->{prefix}/$key", 1) if defined $key;
	my $length = defined $body ? length($body) : 0;
	my %ms = (
		'x-ms-date' => strftime('%a, %d %b %Y %H:%M:%S GMT', gmtime()),
		'x-ms-version' => '2021-08-06',
		%{ $extra // {} });
	my $content_type = $method eq 'PUT' ? 'application/octet-stream' : '';

	my $to_sign = join("\n",
		$method, '', '', ($length > 0 ? $length : ''), '', $content_type,
		'', '', '', '', '', '')
	  . "\n"
	  . join('', map { lc($_) . ":$ms{$_}\n" } sort { lc($a) cmp lc($b) } keys %ms)
	  . "/$self->{account}$endpoint_path$path"
	  . join('', map { "\n$_:$query->{$_}" } sort keys %$query);
	my $signature =
	  encode_base64(hmac_sha256($to_sign, decode_base64($self->{account_key})), '');

	my %headers = (%ms, authorization => "SharedKey $self->{account}:$signature");
	$headers{'content-type'} = $content_type if $content_type ne '';
	my $qs = join('&', map { "$_=" . _uri_encode($query->{$_}) } sort keys %$query);
	my $url = "$scheme://$host$endpoint_path$path" . ($qs ne '' ? "?$qs" : '');
	my %args = (headers => \%headers);
	$args{content} = $body // '' if $method eq 'PUT';
	return $self->{http}->request($method, $url, \%args);
}

# $include: the List Blobs "include" option (e.g. uncommittedblobs), if any.
sub _azure_list
{
	my ($self, $prefix, $include) = @_;
	my $full = "$self->{prefix}/$prefix";
	my (@keys, $marker);
	do
	{
		my %q = (restype => 'container', comp => 'list', prefix => $full);
		$q{marker} = $marker if defined $marker;
		$q{include} = $include if defined $include;
		my $r = $self->_request('GET', undef, \%q);
		_check($r, "LIST $prefix");
		my $xml = $r->{content};
		push @keys, map { substr(_xml_unescape($_), length($self->{prefix}) + 1) }
		  $xml =~ m{<Name>(.*?)</Name>}g;
		($marker) = $xml =~ m{<NextMarker>(.+?)</NextMarker>};
		$marker = _xml_unescape($marker) if defined $marker;
	} while (defined $marker);
	return sort @keys;
}

1;
