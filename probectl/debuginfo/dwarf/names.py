"""The names DWARF gives its numbers (DWARF 5, section 7, and the GNU extensions gcc emits): tags,
attributes, forms and expression operations, named as the standard names them ("DW_TAG_member").

The DIE reader (:mod:`.units`) and the expression decoder (:mod:`.location`) hand these names to the
resolver, which asks for attributes and tags by name; a number missing here stays a number.
"""
from __future__ import annotations


def _named(prefix: str, table: str) -> dict[int, str]:
    out = {}
    for line in table.split("\n"):
        for item in line.split():
            number, name = item.split("=")
            out[int(number, 16)] = prefix + name
    return out


TAG = _named("DW_TAG_", """
01=array_type 02=class_type 03=entry_point 04=enumeration_type 05=formal_parameter
08=imported_declaration 0a=label 0b=lexical_block 0d=member 0f=pointer_type 10=reference_type
11=compile_unit 12=string_type 13=structure_type 15=subroutine_type 16=typedef 17=union_type
18=unspecified_parameters 19=variant 1a=common_block 1b=common_inclusion 1c=inheritance
1d=inlined_subroutine 1e=module 1f=ptr_to_member_type 20=set_type 21=subrange_type 22=with_stmt
23=access_declaration 24=base_type 25=catch_block 26=const_type 27=constant 28=enumerator
29=file_type 2a=friend 2b=namelist 2c=namelist_item 2d=packed_type 2e=subprogram
2f=template_type_parameter 30=template_value_parameter 31=thrown_type 32=try_block 33=variant_part
34=variable 35=volatile_type 36=dwarf_procedure 37=restrict_type 38=interface_type 39=namespace
3a=imported_module 3b=unspecified_type 3c=partial_unit 3d=imported_unit 3f=condition
40=shared_type 41=type_unit 42=rvalue_reference_type 43=template_alias 44=coarray_type
45=generic_subrange 46=dynamic_type 47=atomic_type 48=call_site 49=call_site_parameter
4a=skeleton_unit 4b=immutable_type
4081=MIPS_loop 4101=format_label 4102=function_template 4103=class_template
4106=GNU_template_template_param 4107=GNU_template_parameter_pack 4108=GNU_formal_parameter_pack
4109=GNU_call_site 410a=GNU_call_site_parameter
""")

AT = _named("DW_AT_", """
01=sibling 02=location 03=name 09=ordering 0b=byte_size 0c=bit_offset 0d=bit_size 10=stmt_list
11=low_pc 12=high_pc 13=language 15=discr 16=discr_value 17=visibility 18=import 19=string_length
1a=common_reference 1b=comp_dir 1c=const_value 1d=containing_type 1e=default_value 20=inline
21=is_optional 22=lower_bound 25=producer 27=prototyped 2a=return_addr 2c=start_scope
2e=bit_stride 2f=upper_bound 31=abstract_origin 32=accessibility 33=address_class 34=artificial
35=base_types 36=calling_convention 37=count 38=data_member_location 39=decl_column 3a=decl_file
3b=decl_line 3c=declaration 3d=discr_list 3e=encoding 3f=external 40=frame_base 41=friend
42=identifier_case 43=macro_info 44=namelist_item 45=priority 46=segment 47=specification
48=static_link 49=type 4a=use_location 4b=variable_parameter 4c=virtuality
4d=vtable_elem_location 4e=allocated 4f=associated 50=data_location 51=byte_stride 52=entry_pc
53=use_UTF8 54=extension 55=ranges 56=trampoline 57=call_column 58=call_file 59=call_line
5a=description 5b=binary_scale 5c=decimal_scale 5d=small 5e=decimal_sign 5f=digit_count
60=picture_string 61=mutable 62=threads_scaled 63=explicit 64=object_pointer 65=endianity
66=elemental 67=pure 68=recursive 69=signature 6a=main_subprogram 6b=data_bit_offset
6c=const_expr 6d=enum_class 6e=linkage_name 6f=string_length_bit_size
70=string_length_byte_size 71=rank 72=str_offsets_base 73=addr_base 74=rnglists_base
76=dwo_name 77=reference 78=rvalue_reference 79=macros 7a=call_all_calls
7b=call_all_source_calls 7c=call_all_tail_calls 7d=call_return_pc 7e=call_value 7f=call_origin
80=call_parameter 81=call_pc 82=call_tail_call 83=call_target 84=call_target_clobbered
85=call_data_location 86=call_data_value 87=noreturn 88=alignment 89=export_symbols 8a=deleted
8b=defaulted 8c=loclists_base
2007=MIPS_linkage_name 2101=sf_names 2102=src_info 2103=mac_info 2104=src_coords 2105=body_begin
2106=body_end 2107=GNU_vector 2108=GNU_guarded_by 2109=GNU_pt_guarded_by 210a=GNU_guarded
210b=GNU_pt_guarded 210c=GNU_locks_excluded 210d=GNU_exclusive_locks_required
210e=GNU_shared_locks_required 210f=GNU_odr_signature 2110=GNU_template_name
2111=GNU_call_site_value 2112=GNU_call_site_data_value 2113=GNU_call_site_target
2114=GNU_call_site_target_clobbered 2115=GNU_tail_call 2116=GNU_all_tail_call_sites
2117=GNU_all_call_sites 2118=GNU_all_source_call_sites 2119=GNU_macros 211a=GNU_deleted
2130=GNU_dwo_name 2131=GNU_dwo_id 2132=GNU_ranges_base 2133=GNU_addr_base 2134=GNU_pubnames
2135=GNU_pubtypes 2136=GNU_discriminator 2137=GNU_locviews 2138=GNU_entry_view
""")

FORM = _named("DW_FORM_", """
01=addr 03=block2 04=block4 05=data2 06=data4 07=data8 08=string 09=block 0a=block1 0b=data1
0c=flag 0d=sdata 0e=strp 0f=udata 10=ref_addr 11=ref1 12=ref2 13=ref4 14=ref8 15=ref_udata
16=indirect 17=sec_offset 18=exprloc 19=flag_present 1a=strx 1b=addrx 1c=ref_sup4 1d=strp_sup
1e=data16 1f=line_strp 20=ref_sig8 21=implicit_const 22=loclistx 23=rnglistx 24=ref_sup8
25=strx1 26=strx2 27=strx3 28=strx4 29=addrx1 2a=addrx2 2b=addrx3 2c=addrx4
1f01=GNU_addr_index 1f02=GNU_str_index 1f20=GNU_ref_alt 1f21=GNU_strp_alt
""")

OP = _named("DW_OP_", """
03=addr 06=deref 08=const1u 09=const1s 0a=const2u 0b=const2s 0c=const4u 0d=const4s 0e=const8u
0f=const8s 10=constu 11=consts 12=dup 13=drop 14=over 15=pick 16=swap 17=rot 18=xderef 19=abs
1a=and 1b=div 1c=minus 1d=mod 1e=mul 1f=neg 20=not 21=or 22=plus 23=plus_uconst 24=shl 25=shr
26=shra 27=xor 28=bra 29=eq 2a=ge 2b=gt 2c=le 2d=lt 2e=ne 2f=skip
90=regx 91=fbreg 92=bregx 93=piece 94=deref_size 95=xderef_size 96=nop 97=push_object_address
98=call2 99=call4 9a=call_ref 9b=form_tls_address 9c=call_frame_cfa 9d=bit_piece
9e=implicit_value 9f=stack_value a0=implicit_pointer a1=addrx a2=constx a3=entry_value
a4=const_type a5=regval_type a6=deref_type a7=xderef_type a8=convert a9=reinterpret
e0=GNU_push_tls_address f0=GNU_uninit f1=GNU_encoded_addr f2=GNU_implicit_pointer
f3=GNU_entry_value f4=GNU_const_type f5=GNU_regval_type f6=GNU_deref_type f7=GNU_convert
f9=GNU_reinterpret fa=GNU_parameter_ref fb=GNU_addr_index fc=GNU_const_index
fd=GNU_variable_value
""")
OP.update({0x30 + n: f"DW_OP_lit{n}" for n in range(32)})
OP.update({0x50 + n: f"DW_OP_reg{n}" for n in range(32)})
OP.update({0x70 + n: f"DW_OP_breg{n}" for n in range(32)})
