
# Copyright (c) rollout_fdw authors
#
# ExpectedRows.pm — the rows a test expects in its tables (key => v), kept
# in step with the INSERTs that put them there, for tables (id text, v int).
#
#   my $expected = ExpectedRows->new($node);
#   $expected->insert_range('t', 'a', 1, 200);          # a0001..a0200, v = i, one transaction
#   $expected->insert_range('t', 'a', 1, 50, 10000);    # newer versions, v = i + 10000
#   $expected->insert_range('t', 'k', 31, 35, 0, single => 1);   # one transaction per row
#   $expected->rows('t')     the hash key => v itself (for rows a test writes otherwise)
#   $expected->state('t')    "N|N|SUM": count(*), count(DISTINCT id), sum(v) as psql prints them
#   $expected->table_state('t')   the same three as the node reads them now

package ExpectedRows;

use strict;
use warnings;

sub new
{
	my ($class, $node) = @_;
	return bless { node => $node, tables => {} }, $class;
}

sub rows
{
	my ($self, $table) = @_;
	return $self->{tables}{$table} //= {};
}

# INSERT keys <prefix><i> (i zero-padded to 4) for i in from..to with
# v = i + offset into $table — in one transaction, or with single => 1 in
# one transaction per row — and remember them.
sub insert_range
{
	my ($self, $table, $prefix, $from, $to, $offset, %opts) = @_;
	$offset //= 0;
	if ($opts{single})
	{
		$self->{node}->safe_psql('postgres',
			join('',
				map { sprintf("INSERT INTO %s VALUES ('%s%04d', %d);\n", $table, $prefix, $_, $_ + $offset) }
				  $from .. $to));
	}
	else
	{
		$self->{node}->safe_psql('postgres',
			"INSERT INTO $table SELECT '$prefix' || lpad(i::text, 4, '0'), i + $offset FROM generate_series($from, $to) i"
		);
	}
	$self->rows($table)->{ sprintf('%s%04d', $prefix, $_) } = $_ + $offset for $from .. $to;
	return;
}

sub state
{
	my ($self, $table) = @_;
	my $h = $self->rows($table);
	my $n = scalar(keys %$h);
	my $sum = 0;
	$sum += $_ for values %$h;
	return "$n|$n|$sum";
}

# count(*), count(DISTINCT id) and sum(v) (0 when empty) of $table, read
# on the node: what state() expects.
sub table_state
{
	my ($self, $table) = @_;
	return $self->{node}->safe_psql('postgres',
		"SELECT count(*), count(DISTINCT id), coalesce(sum(v), 0) FROM $table");
}

1;
