// SPDX-License-Identifier: Apache-2.0
// The topology XML format (topology layer): NCCL_TOPO_DUMP_FILE writes it, NCCL_TOPO_FILE reads it.
//
//   <system version="1">
//     <linkclass name="net" bw="1.25" lat="20" measured="0"/>       GB/s and us, one per class (optional)
//     <host id="0" name="node-a">                                    ids are positions: 0, 1, 2, ...
//       <package id="0" model="..."/>                                OS index
//       <numa id="0" package="0" memory="68719476736" cpus="0-15"/>  OS index, bytes, cpu list
//       <core id="0" numa="0" package="0" pus="0,16"/>
//       <pci busid="0000:00:01.0" class="0x0604" vendor="0x8086" device="0x1234" link="15.75" numa="0">
//         <pci busid="0000:01:00.0" class="0x0200" .../>             nesting is the PCI tree
//       </pci>
//       <nic name="eth0" speed="1000" busid="0000:01:00.0" numa="0" addr="10.0.0.1,fe80::1"/>   Mbps
//       <gpu id="0" name="..." uuid="..." busid="..." numa="0" dies="2" memory="..."/>
//     </host>
//     <link a="h0:nic1" b="h1:nic0" class="net" bw="0.125" lat="50"/>  endpoints: hN:numaK, hN:gpuK[.die], hN:nicK
//     <rank id="0" host="0" numa="0" gpu="0" die="1"/>
//   </system>
//
// Omitted attributes take their defaults (unknown, -1, the class figures). Unknown elements or attributes are
// errors, so a typo is reported rather than silently ignored. Writing then reading gives back the same data.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "topology/topology_view.h"

namespace cfx::topo {

// Text to view. `source` names the input in errors: "topo.xml:12: <nic> attribute 'speed': ...".
Result<TopologyView> parseTopologyXml(std::string_view text, const std::string& source);
// View to text.
std::string topologyToXml(const TopologyView& view);

// File versions. SystemError when the file cannot be read or written, naming the path and errno text.
Result<TopologyView> loadTopologyFile(const std::string& path);
Status dumpTopologyFile(const TopologyView& view, const std::string& path);

}  // namespace cfx::topo
