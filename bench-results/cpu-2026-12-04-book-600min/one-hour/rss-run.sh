#!/bin/bash
# usage: rssrun.sh NAME OUTPUT -- records RSS every 0.5 s of a render of /tmp/b60/book.epub
name=$1 out=$2
rm -rf /tmp/b60/cache-$name
/work/main/target/release/talker render --json --cache /tmp/b60/cache-$name -o "$out" /tmp/b60/book.epub > /tmp/b60/$name-report.json 2> /tmp/b60/$name-stderr.txt &
pid=$!
while kill -0 $pid 2>/dev/null; do
  echo "$(date +%s.%N | cut -c1-14) $(grep VmRSS /proc/$pid/status 2>/dev/null | awk '{print $2}') $(grep -o '"stage":"[a-z]*"' /tmp/b60/$name-stderr.txt | tail -1)" >> /tmp/b60/$name-rss.txt
  sleep 0.5
done
echo done >> /tmp/b60/$name-rss.txt
