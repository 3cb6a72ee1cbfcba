#!/bin/sh
# Test provisioner that always fails, as a cloud CLI out of quota would.
echo "requesting $2 instances for pool $1"
echo "error: quota exceeded: 0 of $2 instances available in zone test-a" >&2
exit 3
