"""Which tests ``make test-fast`` leaves to ``make test`` (``-m "not slow"``): whole modules
of whole jobs, and single tests that cost the fast run most. ``conftest.py`` marks them."""

from __future__ import annotations

# modules whose tests run whole jobs: Beam builds and their failures, torchrun, DCP, JAX,
# accelerate and Hugging Face Trainer jobs, torchft lighthouses and replica groups, notebooks, the docs' examples, tokenizers checked over the whole corpus.
# make test-fast runs the rest (-m "not slow"): the stages, formats, states and errors.
SLOW_MODULES = {
    "test_accelerate", "test_dask_build", "test_unigram_native", "test_one_buffer", "test_worker_count", "test_device_mesh", "test_folder_readers", "test_process_group", "test_cache_equals_stream", "test_cache_as_you_go", "test_cache_safety", "test_dataflow_dry_run", "test_dcp_checkpoint",
    "test_docs", "test_fast_path_as_downloaded", "test_fast_path_byte_level", "test_fast_path_cached_words", "test_global_shuffle", "test_jax_example", "test_fast_path_families",
    "test_global_shuffle_local_copy", "test_grain_example", "test_megatron", "test_notebooks", "test_packaging", "test_tokenize_workers", "test_parquet_compat", "test_progress", "test_range_pack",
    "test_s3_cache", "test_sentencepiece_files", "test_split_build", "test_torchrun_example", "test_training_loop", "test_worker_server", "test_torchtitan", "test_lightning", "test_byte_level_compiled",
    "test_trainer", "test_kernel_warmup", "test_end_of_data", "test_end_of_data_ranks", "test_orphan_workers", "test_trl_templates", "test_few_shards",
    "test_stats_every_packing", "test_shard_table", "test_grain_source", "test_torchft",
}  # fmt: skip

# single tests of the other modules that cost make test-fast over 5 s of CPU apiece (all their
# cases together): whole-corpus tokenizer checks, tokenizers trained for one test, many-point
# resume sweeps over caches and mixes, caches built by Beam inside a test, tiny-model passes.
# make test runs them; make test-fast checks the same guarantees on the cheaper tests beside them.
SLOW_TESTS = {
    "test_added_segments::test_gemma_2s_added_tokens_are_cut_out_and_the_parts_encoded_by_the_engine",
    "test_added_segments::test_any_mix_of_added_tokens_and_text_gives_the_ids_of_tokenizers",
    "test_skip_and_start_step::test_skip_equals_reading_and_dropping_at_every_point",
    "test_chat_exact::test_ids_and_mask_equal_apply_chat_template",
    "test_chat_exact::test_hypothesis_conversations_token_for_token",
    "test_mix_while_training::test_a_repetition_cap_spends_a_source_and_the_others_fill_in",
    "test_bpe_native::test_random_models_give_the_ids_of_tokenizers",
    "test_epoch_boundaries::test_step_and_skip_at_every_epoch_start",
    "test_epoch_boundaries::test_the_step_just_past_the_end_is_refused_as_any_later_one",
    "test_world_size_change::test_global_shuffle_resumes_on_any_world_size_in_one_global_order",
    "test_world_size_change::test_shuffle_windows_through_two_changes_and_workers",
    "test_attention::test_packed_row_losses_equal_pieces_run_alone",
    "test_saved_states_v2::test_saved_states_of_two_ranks_resume_on_other_world_sizes",
    "test_sft::test_unpacked_sft_cache_packs_at_read_time_like_on_the_fly",
    "test_sft::test_sft_and_chat_caches_equal_the_stream_and_resume_across_modes",
    "test_sft::test_packers_resume_exactly",
    "test_loaded_tokenizers::test_a_hub_name_in_the_hugging_face_cache_is_kept_by_its_snapshot",
    "test_user_errors::test_hub_name_without_the_hub_fails_at_once_with_the_way_out",
    "test_mix_seek::test_the_seeking_mix_is_the_reading_mix",
    "test_mix_seek::test_a_spread_global_shuffle_of_two_shards_is_a_mix_source",
    "test_bad_input::test_accounting_identity_in_both_modes",
    "test_bad_input::test_cli_bad_record_names_file_and_line",
    "test_column_pack::test_the_same_rows_cursors_and_counts_as_the_per_row_packer_from_every_cursor",
    "test_torch_output::test_stateful_dataloader_resumes_exactly",
    "test_pack_documents::test_cache_equals_stream_and_states_cross_modes",
    "test_json_lines::test_damaged_lines_fail_or_read_as_json_does",
    "test_batch_paths::test_a_packed_cache_batches_alike_through_blocks_and_examples",
    "test_kitoken_engine::test_whitespace_next_to_anything_encodes_as_tokenizers",
    "test_mix_nested::test_readers_splitting_by_examples_seek_a_nested_mix_of_caches",
}  # fmt: skip


def leaves_out_slow(markexpr: str) -> bool:
    """Whether ``-m markexpr`` deselects every slow test whatever its other markers: true when
    the expression is false with ``slow`` and every other marker name true ("not slow", "not slow
    and not x"); false for no expression, "slow", "x" or one pytest cannot parse."""
    if not markexpr:
        return False
    from _pytest.mark.expression import Expression  # pytest's own -m parser

    try:
        expression = Expression.compile(markexpr)
    except Exception:  # pytest reports a bad -m itself, after collection
        return False
    return not expression.evaluate(lambda name, **_: True)
