#!/usr/bin/perl
# gen_rows.pl — deterministic, realistic rollout rows in COPY text format.
#
#   perl gen_rows.pl FIRST LAST SEED > rows.copy
#
# Row n (FIRST <= n <= LAST) is one step of an agent rollout:
#   id          uuid    md5("row-n") — random-looking, reproducible (lookups can
#                       compute any row's key as md5(n::text)::uuid in SQL)
#   rollout_id  uuid    md5("rollout-r"), r = (n-1) / 32: 32 steps per rollout
#   step        int     (n-1) % 32
#   role        text    system / user / assistant / tool
#   reward      float8  uniform in [0, 1), 4 decimals
#   created_at  timestamptz  2025-01-01 + n * 50 ms
#   payload     jsonb   about 1 KB: a chat message of random words drawn from a
#                       5,000-word vocabulary (compresses about like natural text),
#                       token count, model name, a few log-probabilities
# Every row with the same n is identical whatever the range it is generated in,
# so the data set can be generated in parallel parts.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);

my ($first, $last, $seed) = @ARGV;
die "usage: gen_rows.pl FIRST LAST SEED\n" unless defined $seed;

# the vocabulary depends only on the seed
srand($seed);
my @letters = split //, 'etaoinshrdlcumwfgypbvkjxqz';
my @vocab;
for (1 .. 5000) {
	my $len = 2 + int(rand(9));
	my $w = '';
	# skewed letter choice: frequent letters more often, like English text
	$w .= $letters[int(rand(1) ** 2 * 26)] for 1 .. $len;
	push @vocab, $w;
}
my $nv = scalar @vocab;
my @roles = ('system', 'user', 'assistant', 'tool');
my $epoch = 1735689600;    # 2025-01-01 00:00:00 UTC

sub uuid_of {
	my $h = md5_hex($_[0]);
	return substr($h, 0, 8) . '-' . substr($h, 8, 4) . '-' . substr($h, 12, 4) . '-'
	  . substr($h, 16, 4) . '-' . substr($h, 20, 12);
}

$| = 0;
for my $n ($first .. $last) {
	srand($seed * 1000003 + $n);    # row content depends on (seed, n) only
	my $r    = int(($n - 1) / 32);
	my $step = ($n - 1) % 32;
	my $role = $step == 0 ? 'system' : $roles[1 + ($step % 3)];
	my $reward = sprintf('%.4f', rand());
	my $ms = $n * 50;
	my $t  = $epoch + int($ms / 1000);
	my @tm = gmtime($t);
	my $ts = sprintf('%04d-%02d-%02d %02d:%02d:%02d.%03d+00', $tm[5] + 1900, $tm[4] + 1, $tm[3],
		$tm[2], $tm[1], $tm[0], $ms % 1000);
	my $text = '';
	while (length($text) < 820) {
		$text .= $vocab[int(rand() ** 1.5 * $nv)] . ' ';
	}
	chop $text;
	my $tokens = 150 + int(rand(100));
	my $lp = join(',', map { sprintf('-%.3f', rand(5)) } 1 .. 5);
	my $payload = qq({"messages": [{"role": "$role", "content": "$text"}], "model": "policy-v3", )
	  . qq("tokens": $tokens, "logprobs": [$lp], "done": ) . ($step == 31 ? 'true' : 'false') . '}';
	print uuid_of("row-$n"), "\t", uuid_of("rollout-$r"), "\t$step\t$role\t$reward\t$ts\t$payload\n";
}
