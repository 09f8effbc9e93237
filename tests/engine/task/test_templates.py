"""Job-parameter rendering (jedi-inventory §6.9) and the §16.1 worked example with output names (§6.8)."""

from __future__ import annotations

import os.path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jedictl.engine.jobs.resources import (
    OutputTemplate,
    allocate_output_names,
    job_serial_nr,
)
from jedictl.engine.task.templates import (
    InputFile,
    InputStream,
    JobContext,
    OutputFile,
    UnresolvedPlaceholder,
    _common_prefix,
    compact_lfn_list,
    evaluate_arithmetic,
    render_job_parameters,
)

TASK_ID = 12
TEMPLATE_16_1 = "--in=${IN} --out=${OUTPUT0} --n 10"  # what the refiner makes of §16.1's jobParameters


def stream(name: str, *lfns: str, master: bool = True, dataset: str = "ds.in", **event_fields) -> InputStream:
    return InputStream(name, dataset, tuple(InputFile(lfn, **event_fields) for lfn in lfns), is_master=master)


def context(*inputs: InputStream, outputs: tuple[OutputFile, ...] = (), **values) -> JobContext:
    return JobContext(task_id=TASK_ID, inputs=inputs, outputs=outputs, **values)


def render(template: str, job: JobContext) -> str:
    return render_job_parameters(template, job).text


# ------------------------------------------------------------------------------------------- §16.1

def test_worked_example_16_1_scouts_then_avalanche():
    """25 files, nFilesPerJob=2: 10 scout jobs on 20 released files, then 3 jobs on the last 5."""
    files = [f"f.{n:03d}.root" for n in range(1, 26)]
    templates = [OutputTemplate(1, 3, "ds.out.${SN}.root", 1, "OUTPUT0", "output"),
                 OutputTemplate(2, 4, "ds.log.${SN}.log.tgz", 1, "LOG0", "log")]
    scouts = allocate_output_names(templates, 10, TASK_ID)
    assert scouts.next_serial_nr == ((1, 11), (2, 11))  # templates advance to serialNr=11

    rendered = []
    for index, names in enumerate(scouts.jobs):
        job = context(stream("IN", *files[2 * index: 2 * index + 2]),
                      outputs=tuple(OutputFile(n.stream, n.lfn) for n in names), serial_nr=job_serial_nr(names))
        rendered.append(render(TEMPLATE_16_1, job))
    assert rendered[0] == "--in=f.[001,002].root --out=ds.out.000001.root --n 10"
    assert [n.lfn for n in scouts.jobs[0]] == ["ds.out.000001.root", "ds.log.000001.log.tgz"]
    assert rendered[9] == "--in=f.[019,020].root --out=ds.out.000010.root --n 10"

    after = [OutputTemplate(t.id, t.dataset_id, t.filename_template, serial, t.stream_name, t.out_type)
             for t, (_, serial) in zip(templates, scouts.next_serial_nr, strict=True)]
    avalanche = allocate_output_names(after, 3, TASK_ID)
    chunks = [files[20:22], files[22:24], files[24:]]
    params = [render(TEMPLATE_16_1, context(stream("IN", *chunk), outputs=(OutputFile("OUTPUT0", names[0].lfn),)))
              for chunk, names in zip(chunks, avalanche.jobs, strict=True)]
    assert params == [
        "--in=f.[021,022].root --out=ds.out.000011.root --n 10",
        "--in=f.[023,024].root --out=ds.out.000012.root --n 10",
        "--in=f.025.root --out=ds.out.000013.root --n 10",  # the short last chunk: one file, plain name
    ]
    assert [n.serial_nr for n in avalanche.jobs[2]] == [13, 13]


def test_a_regenerated_job_takes_new_serial_numbers():
    """Option B: the retry of job 1 (serial 1) is a new job, so it gets the next serial, never 1 again."""
    template = OutputTemplate(1, 3, "ds.out.${SN/P}.root", 11, "OUTPUT0", "output")
    retry = allocate_output_names([template], 1, TASK_ID)
    assert retry.jobs[0][0].lfn == "ds.out.000011.root"
    assert retry.next_serial_nr == ((1, 12),)


# ----------------------------------------------------------------------------------- compact lists

@pytest.mark.parametrize("lfns,expected", [
    (["f.001.root"], "f.001.root"),
    (["f.001.root", "f.002.root", "f.004.root"], "f.[001,002,004].root"),
    (["file.1.pool", "file.2.pool", "file.12.pool"], "file.[1,2,12].pool"),
    (["EVNT.01._000001.pool.root.1", "EVNT.01._000002.pool.root.3"], "EVNT.01._[000001,000002].pool.root"),
    (["ABC_00_XYZ", "ABC_10_XYZ"], "ABC_[00,10]_XYZ"),
    (["a.root", "b.root"], "a.root,b.root"),  # varying part not numeric: full list
    (["x.1a.root", "x.2b.root"], "x.1a.root,x.2b.root"),
    (["f.root.1", "f.root.2"], "f.root.1,f.root.2"),  # same name once attempts are stripped
])
def test_compact_form(lfns, expected):
    assert compact_lfn_list(lfns) == expected


@given(st.lists(st.text(alphabet="ab.01_", max_size=12), min_size=1, max_size=6))
def test_the_common_head_is_the_longest_one_every_name_starts_with(names):
    assert _common_prefix(names) == os.path.commonprefix(names)


def test_inputs_are_sorted_and_deduplicated_unless_the_order_is_kept():
    job = context(stream("IN", "f.3", "f.1", "f.2", "f.1"))
    assert render("${IN/L}", job) == "f.1,f.2,f.3"
    kept = context(stream("IN", "f.3", "f.1", "f.2", "f.1"), keep_input_order=True)
    assert render("${IN/L}", kept) == "f.3,f.1,f.2"


# -------------------------------------------------------------------------------------- decorators

def test_all_decorators():
    job = context(stream("IN", "a.1.root", "a.2.root", dataset="scope:data.in/"))
    assert render("${IN/L}", job) == "a.1.root,a.2.root"
    assert render("${IN/S}", job) == "a.1.root a.2.root"
    assert render("${IN/L/S}", job) == "a.1.root a.2.root"
    assert render("${IN/A}", job) == "'a.1.root','a.2.root'"
    assert render("${IN/L/A/S}", job) == "'a.1.root' 'a.2.root'"
    assert render("${IN/T}", job) == "['a.1.root', 'a.2.root']"
    result = render_job_parameters("--inputs ${IN/F}", job)
    assert result.text == "--inputs tmpin_data.in"  # scope and trailing slash dropped
    assert result.input_list_files == (("tmpin_data.in", ("a.1.root", "a.2.root")),)


def test_url_decoding():
    assert render("${IN/E}", context(stream("IN", "run%3A1.root"))) == "run:1.root"
    assert render("${IN/E}", context(stream("IN", "a%2Cb.1", "a%2Cb.2"))) == "a,b.1,a,b.2"


def test_several_streams_and_slices():
    job = context(stream("IN", "m_1", "m_2", "m_3"), stream("IN2", "s_1", master=False, dataset="ds.sec"))
    assert render("${IN,IN2/L}", job) == "m_1,m_2,m_3,s_1"
    assert render("${IN,IN2}", job) == "m_1,m_2,m_3,s_1"  # no common head: full list
    assert render("${IN[0:2]}", job) == "m_[1,2]"
    assert render("${IN[1:]/L}", job) == "m_2,m_3"
    assert render("${IN[-1]}", job) == "m_3"
    assert render("${IN[::2]/L}", job) == "m_1,m_3"
    assert render("${IN2}", job) == "s_1"
    # m.1, m.2 end in what JEDI reads as attempt numbers: no compact form, the full names
    assert render("${IN}", context(stream("IN", "m.1", "m.2"))) == "m.1,m.2"


def test_arithmetic_on_a_single_file_name():
    job = context(stream("SEQNUMBER", "7", dataset="seq_number"))
    assert render("--seed=${SEQNUMBER/M[#*10+1]}", job) == "--seed=71"
    assert render("${SEQNUMBER/M[(# + 1) / 2]}", job) == "4.0"
    assert evaluate_arithmetic("-#//2 % 5", "9") == "0"


@pytest.mark.parametrize("expression", ["__import__('os').system('id')", "#**99999", "1;2", "# if 1 else 0", "(#", "#/0"])
def test_arithmetic_refuses_anything_but_arithmetic(expression):
    job = context(stream("SEQNUMBER", "7", dataset="seq_number"))
    with pytest.raises(UnresolvedPlaceholder) as error:
        render("${SEQNUMBER/M[" + expression + "]}", job)
    assert error.value.placeholder.startswith("${SEQNUMBER/M[")


def test_arithmetic_needs_a_number():
    with pytest.raises(UnresolvedPlaceholder, match="numeric"):
        render("${IN/M[#+1]}", context(stream("IN", "f.root")))


# -------------------------------------------------------------------------------------------- scalars

def test_scalars():
    job = context(
        stream("IN", "f.1", start_event=100, end_event=149, first_event=1101), stream("IN", "f.2", start_event=0, end_event=49),
        outputs=(OutputFile("OUTPUT0", "out.000042.root"),), serial_nr=42, attempt_nr=3, random_seed=1234,
        source_url="https://cache.example/x", middle_name=".run7", panda_id=4711, extra={"LIB": "lib.tgz"},
    )
    template = ("${SN} ${SN/P} ${RNDMSEED} ${MAXEVENTS} ${SKIPEVENTS} ${FIRSTEVENT} ${SURL} ${ATTEMPTNR} "
                "$JEDITASKID ${JEDITASKID} ${MIDDLENAME} ${PANDAID} ${LIB} ${OUTPUT0}")
    assert render(template, job) == ("42 000042 1234 100 100 1101 https://cache.example/x 3 12 12 .run7 4711 "
                                     "lib.tgz out.000042.root")


def test_maxevents_is_minus_one_without_event_ranges_and_skipevents_zero():
    job = context(stream("IN", "f.1"))
    assert render("--maxEvents=${MAXEVENTS} --skipEvents=${SKIPEVENTS}", job) == "--maxEvents=-1 --skipEvents=0"


def test_unknown_dollar_braces_are_kept_and_text_is_never_expanded_twice():
    job = context(stream("IN", "odd${IN}name"))
    assert render("echo ${HOME} $PATH ${IN}", job) == "echo ${HOME} $PATH odd${IN}name"
    assert render("${PANDAID}", context(stream("IN", "f"))) == "${PANDAID}"  # filled once the job has an id


# -------------------------------------------------------------------------------- unresolved values

@pytest.mark.parametrize("template,placeholder", [
    ("--in=${IN2}", "${IN2}"),  # a stream with no file in this job
    ("${SEQNUMBER}", "${SEQNUMBER}"),
    ("${RNDMSEED}", "${RNDMSEED}"),  # no seed given to this job
    ("${FIRSTEVENT}", "${FIRSTEVENT}"),
    ("${LIB}", "${LIB}"),
    ("${IN[5:9]}", "${IN[5:9]}"),  # selects no file
    ("${IN[a:b]}", "${IN[a:b]}"),  # not a range: refused, never executed
    ("${IN/Q}", "${IN/Q}"),
    ("${SN/L}", "${SN/L}"),
])
def test_unresolved_placeholder_names_it(template, placeholder):
    with pytest.raises(UnresolvedPlaceholder) as error:
        render(template, context(stream("IN", "f.1")))
    assert error.value.placeholder == placeholder
    assert placeholder in str(error.value)


# ------------------------------------------------------------------------------- merge and ES jobs

def test_merge_pairs_and_streams_without_input():
    job = context(
        InputStream("TRN_OUTPUT0", "panda.um.ds.out", (InputFile("panda.um.a.1", size=10), InputFile("panda.um.a.2", size=30)), True),
        InputStream("TRN_LOG0", "panda.um.ds.log", (InputFile("panda.um.l.1", size=1),)),
        outputs=(OutputFile("OUTPUT0", "a.merged.1"), OutputFile("OUTPUT1", "b.merged.1"), OutputFile("LOG_MERGE", "log.1")),
        is_merge=True,
    )
    result = render_job_parameters("merge ${TRN_OUTPUT0:OUTPUT0} --outB=${OUTPUT1} --log=${LOG_MERGE} "
                                   "[${TRN_OUTPUT:OUTPUT}] ${TRN_LOG0:LOG_MERGE}", job)
    # largest input first; OUTPUT1 has no unmerged input, so its argument and output go
    assert result.text == ("merge panda.um.a.2,panda.um.a.1:a.merged.1 --log=log.1 "
                           "[panda.um.a.2,panda.um.a.1:a.merged.1] panda.um.l.1:log.1")
    assert result.dropped_outputs == ("OUTPUT1",)


def test_unmerged_outputs_replace_literal_final_names():
    job = context(stream("IN", "f.1"), outputs=(OutputFile("OUTPUT0", "panda.um.out.000001.root", unmerged=True),))
    assert render("--out=${OUTPUT0} --map out.000001.root", job) == \
        "--out=panda.um.out.000001.root --map panda.um.out.000001.root"


def test_event_service_blocks():
    template = "run <PANDA_ES_ONLY>--eventService=True ${IN}</PANDA_ES_ONLY>--x <PANDA_ESMERGE_x>m</PANDA_ESMERGE_x>"
    plain = context(stream("IN", "f.1"))
    assert render(template, plain) == "run --x "
    es = context(stream("IN", "f.1"), event_service=True)
    assert render(template, es) == "run --eventService=True f.1--x <PANDA_ESMERGE_x>m</PANDA_ESMERGE_x>"


def test_a_stream_of_the_task_without_files_in_this_job_is_unresolved():
    job = context(stream("IN", "f.1"), InputStream("DBR", "ddo.db", ()))
    with pytest.raises(UnresolvedPlaceholder, match="selects no file"):
        render("--db=${DBR}", job)
    assert render("--db=${OTHER}", job) == "--db=${OTHER}"  # not a stream of the task: a shell variable
