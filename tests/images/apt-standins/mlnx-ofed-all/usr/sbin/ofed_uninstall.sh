#!/bin/bash
# TEST STAND-IN (ccc-salt): records its arguments and exits 0; it uninstalls nothing. Its
# presence is what the mellanox role reads as "OFED is installed".
echo "$(date -Is) ofed_uninstall.sh $*" >>/var/log/ccc-fake-mlnx.log
exit 0
