"""moto_atomic.py -- moto_server with S3's conditional writes made atomic.

Usage: python3 moto_atomic.py [moto_server arguments]   (test/servers/moto.sh)

S3 promises that a PUT with "If-None-Match: *" creates the key only if it
is absent, and that "If-Match" replaces only the version it names, even
when several such requests race.  moto 5.2.1 serves requests on threads
and checks the condition before it stores the object, with nothing held
in between (moto/s3/responses.py, put_object): two racing creates of one
key can both get 200, and the later one silently replaces the earlier.
Every committer of a shard without the shared-memory writer creates its
WAL entry that way, so under that race a commit is acknowledged and then
overwritten: test/t/002_concurrent_inserts.pl once lost one of 1,000
transactions on moto.  Real S3, Ceph RGW and Azurite decide the condition
atomically.

So that the S3 tests test our protocol and not moto's threading, this
runs moto_server with every write to an object (PUT, including copies
and conditional PUTs; POST, including CompleteMultipartUpload with
If-None-Match; DELETE) done under one lock.  Reads are untouched.  The
race can be shown without this wrapper by starting moto with
sys.setswitchinterval(1e-6) and sending eight conditional PUTs of one
key at once: several rounds in a few hundred have two winners.
"""

import sys
import threading

from moto.s3.responses import S3Response
from moto.server import main

_object_writes = threading.Lock()


def _serialized(handler):
    def handle(self, *args, **kwargs):
        with _object_writes:
            return handler(self, *args, **kwargs)

    handle.__name__ = handler.__name__
    return handle


for _name in ("_key_response_put", "_key_response_post", "_key_response_delete"):
    setattr(S3Response, _name, _serialized(getattr(S3Response, _name)))

if __name__ == "__main__":
    main(sys.argv[1:])
