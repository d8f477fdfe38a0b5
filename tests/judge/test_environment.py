"""The driver's version, which keys the baseline cache, is read from the kernel module's files, not by starting
nvidia-smi (seconds, on a rescore that has ten in all); every source gives the same string."""

from __future__ import annotations

from evalkit.judge import environment


def test_the_version_file_formats_of_both_driver_flavours():
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
    open_module = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
                   "(dvs-builder@U22-I3-AF03-09-1)  Thu Oct 10 12:15:00 UTC 2025\nGCC version:  gcc version 13.3.0\n")
    assert environment.driver_from_proc(proprietary) == "550.54.15"
    assert environment.driver_from_proc(open_module) == "580.159.04"
    assert environment.driver_from_proc("no driver here\n") is None


def test_the_module_file_comes_first_and_nvidia_smi_last(tmp_path, monkeypatch):
    module, proc = tmp_path / "module_version", tmp_path / "proc_version"
    monkeypatch.setattr(environment, "MODULE_VERSION_FILE", module)
    monkeypatch.setattr(environment, "DRIVER_VERSION_FILE", proc)
    monkeypatch.setattr(environment, "_driver_from_nvidia_smi", lambda: "from-nvidia-smi")
    assert environment._driver_version() == "from-nvidia-smi"  # neither file exists
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\n")
    assert environment._driver_version() == "550.54.15"
    module.write_text("580.159.04\n")
    assert environment._driver_version() == "580.159.04"
    module.write_text("not a version\n")
    assert environment._driver_version() == "550.54.15"
