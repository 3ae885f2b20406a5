"""Ascend: the CANN toolkit from its installer; PyTorch built for CPU, then torch_npu from source."""

from __future__ import annotations

import shlex

from buildctl.render.providers.fragment import Fragment


def fragment(spec, render_stage) -> Fragment | None:
    asc = spec.toolchain.ascend
    if asc is None:
        return None
    stage = render_stage("ascend_cann.j2", ascend=asc, installer=asc.installer)
    set_env = f"{asc.install_path}/ascend-toolkit/set_env.sh"
    src = asc.torch_npu
    if src.git:
        commit = f" 1 {src.commit}" if src.commit else ""  # the commit resolved before the key
        fetch = f"buildctl-git-fetch {shlex.quote(src.git)} {shlex.quote(src.ref)} $WORK/torch_npu{commit}"
    else:
        fetch = "test -d $WORK/torch_npu"
    return Fragment(
        provider="ascend-cann-installer", stage=stage, stage_name="ascend", copies=(asc.install_path,),
        downloads=(asc.installer,),
        build_env={"USE_CUDA": "0", "USE_ROCM": "0"},
        # set_env.sh reads unset variables; it is sourced with nounset off. The echo shows in the build
        # log that the CANN environment torch_npu's build reads is in place.
        pre_build=(f"set +u; . {shlex.quote(set_env)}; set -u",
                   'echo "buildctl: CANN environment: ASCEND_HOME_PATH=$ASCEND_HOME_PATH ASCEND_OPP_PATH=$ASCEND_OPP_PATH"'),
        post_build=(
            fetch,
            "python -m pip install --no-deps dist/*.whl",
            "(cd $WORK/torch_npu && bash ci/build.sh --python=\"$(python -c 'import sys;print(f\"{sys.version_info[0]}.{sys.version_info[1]}\")')\" "
            "&& cp dist/*.whl $OUT/)",
        ),
        image_checks=(f"test -f {shlex.quote(set_env)}",),
        version_probes={"cann": f"cat {asc.install_path}/ascend-toolkit/latest/*/ascend_toolkit_install.info 2>/dev/null "
                                "| sed -n 's/^version=//p' | head -n1"},
    )
